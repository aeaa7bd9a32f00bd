import CairnTestSupport
import Foundation
import Testing

/// A device that follows two channels from two publishers (`[channel NAME]` in cairnd.conf):
/// each syncs, verifies and installs on its own, searches span both, and one that fails never
/// holds the other back. Real processes: two `cairn-server serve`, one cairnd, `cairn`.
@Suite("Several channels on one device (real processes)", .offCooperativePool, .serialized)
struct ChannelsTests {
    /// Six chunks (in a corpus of two, FTS5's BM25 gives a word found in one of them no weight).
    static let manuals: Workspace.KB = [
        ("generator", "Run a generator outside, never in a garage or a basement: its exhaust kills."),
        ("fuel", "Store fuel in approved containers away from the house."),
        ("chainsaw", "Check the chainsaw chain tension before cutting fallen trees."),
        ("pump", "Prime the hand pump with a cup of clean water."),
        ("ladder", "Set the ladder at one metre out for every four metres up."),
        ("stove", "Use the camping stove only where air moves freely."),
    ]

    /// The `channels` list of the status, by name.
    static func channels(_ device: DeviceProcess) -> [String: [String: Any]] {
        let list = device.status()["channels"] as? [[String: Any]] ?? []
        return Dictionary(list.map { ($0["channel"] as? String ?? "", $0) }, uniquingKeysWith: { a, _ in a })
    }

    static func search(_ device: DeviceProcess, _ body: String) async throws -> [String: Any] {
        try Tools.requireCurl()
        let run = try await CairnTestSupport.run("/usr/bin/curl", ["-s", "--unix-socket", device.socket,
                                                                    "http://localhost/v1/search", "-d", body])
        return (try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8))) as? [String: Any] ?? [:]
    }

    static func origins(_ answer: [String: Any]) -> [(id: String, channel: String, version: Int)] {
        (answer["results"] as? [[String: Any]] ?? []).map {
            (($0["chunk"] as? [String: Any])?["id"] as? String ?? "", $0["channel"] as? String ?? "", $0["version"] as? Int ?? 0)
        }
    }

    @Test("Given a device following field and manuals from two publishers, then each channel installs on its own, a search finds the best answer in the second channel first and names channel and version, channels narrows it, a chunk id both hold is read from the channel named, and a refused manuals update does not stop field's")
    func twoPublishers() async throws {
        let field = try await Workspace.make(), manuals = try await Workspace.make()
        try await field.publishOnThread(Workspace.version1)
        let published = try await onThread { try manuals.tryPublish(Self.manuals, keys: [manuals.key], channel: "manuals") }
        try #require(published.status == 0, "\(published.error)")
        let (fieldServer, fieldURL, _) = try await field.serve()
        defer { stopProcess(fieldServer) }
        let (manualsServer, manualsURL, _) = try await manuals.serve()
        defer { stopProcess(manualsServer) }
        let config = field.folder + "/two-channels.conf"
        try """
            [channel manuals]
            source = \(manualsURL)
            trusted_key = \(manuals.publicKey)
            poll_interval = 3600
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let device = try DeviceProcess(field, sources: [fieldURL], trust: ["--trusted-key", field.publicKey, "--config", config])
        defer { device.stop() }
        try await device.waitForVersion(1)
        try await waitUntil("the manuals channel serves version 1", seconds: 60) {
            Self.channels(device)["manuals"]?["version"] as? Int == 1
        }
        #expect(FileManager.default.fileExists(atPath: device.dataDirectory + "/channels/manuals/current/index.sqlite"))

        // The best answer is in the second channel: it comes first, labelled.
        let generator = try await Self.search(device, #"{"query": "generator in the garage", "k": 3, "mode": "lexical"}"#)
        #expect(Self.origins(generator).first.map { [$0.id, $0.channel] } == ["generator", "manuals"])
        #expect((generator["channels"] as? [[String: Any]])?.compactMap { $0["channel"] as? String } == ["field", "manuals"])
        let boil = try await Self.search(device, #"{"query": "boil water", "k": 3, "mode": "lexical"}"#)
        #expect(Self.origins(boil).first.map { [$0.id, $0.channel] } == ["boil", "field"])
        // Hybrid spans both too, each result naming its channel and version.
        let hybrid = Self.origins(try await Self.search(device, #"{"query": "generator boil", "k": 10}"#))
        #expect(Set(hybrid.map(\.channel)) == ["field", "manuals"] && hybrid.allSatisfy { $0.version == 1 })
        // channels narrows the search; an unknown one is a 400 with a stable code.
        let narrowed = Self.origins(try await Self.search(device, #"{"query": "generator", "k": 3, "channels": ["field"]}"#))
        #expect(!narrowed.contains { $0.channel == "manuals" })
        let unknown = try await Self.search(device, #"{"query": "generator", "channels": ["nope"]}"#)
        #expect(unknown["code"] as? String == "unknown_channel")
        let cli = try device.cairn(["query", "fuel containers", "--channel", "manuals", "--mode", "lexical", "--json"])
        let cliAnswer = (try? JSONSerialization.jsonObject(with: Data(cli.output.utf8))) as? [String: Any] ?? [:]
        #expect(cli.status == 0 && Self.origins(cliAnswer).map(\.channel) == ["manuals"], "\(cli.output)")

        // manuals' next version is signed by a key the device does not trust; field's installs anyway.
        try await field.publishOnThread(Workspace.version2)
        let stranger = try await onThread { try manuals.keygen("stranger") }
        let refused = try await onThread { try manuals.tryPublish(Self.manuals + [("radio", "Keep a radio.")], keys: [stranger], channel: "manuals") }
        try #require(refused.status == 0, "\(refused.error)")
        #expect(try device.cairn(["sync"]).status == 0)
        try await device.waitForVersion(2)
        try await waitUntil("manuals reports its refusal", seconds: 60) {
            Self.channels(device)["manuals"]?["last_error_code"] as? String == "manifest_refused"
        }
        #expect(Self.channels(device)["manuals"]?["version"] as? Int == 1)
        #expect(Self.channels(device)["field"]?["version"] as? Int == 2)
        let after = Self.origins(try await Self.search(device, #"{"query": "generator sandbags", "k": 4, "mode": "lexical"}"#))
        #expect(Set(after.map { "\($0.channel) v\($0.version)" }) == ["field v2", "manuals v1"])
        // An agent's search of one channel (cairn mcp) says that channel's version and freshness,
        // not the daemon's own channel's; a search of all lists every channel.
        let agent = try await AgentTests.mcp(device.socket, [
            #"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"query":"generator","channel":"manuals"}}}"#,
            #"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search","arguments":{"query":"generator sandbags"}}}"#,
            #"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"status","arguments":{}}}"#,
        ], folder: field.folder)
        let one = (agent.answers["1"]?["result"] as? [String: Any])?["structuredContent"] as? [String: Any]
        #expect(one?["channel"] as? String == "manuals" && one?["version"] as? Int == 1, "\(String(describing: one))")
        // When the publisher made it, then how fresh the device's knowledge of it is.
        #expect((one?["freshness"] as? String)?.hasPrefix("Knowledge base version 1 (channel manuals), published 20") == true
                    && (one?["freshness"] as? String)?.contains("; online, checked for updates at 20") == true,
                "\(String(describing: one))")
        let all = (agent.answers["2"]?["result"] as? [String: Any])?["structuredContent"] as? [String: Any]
        #expect((all?["channels"] as? [[String: Any]])?.compactMap { $0["channel"] as? String } == ["field", "manuals"])
        // The search of all says each channel's freshness, one line each.
        let lines = (all?["freshness"] as? String ?? "").split(separator: "\n").map(String.init)
        #expect(lines.count == 2 && lines[0].hasPrefix("Knowledge base version 2 (channel field), published 20")
                && lines[1].hasPrefix("Knowledge base version 1 (channel manuals), published 20")
                && lines.allSatisfy { $0.contains("; online, checked for updates at 20") }, "\(lines)")
        // Its text gives each result's channel beside its id, for `get`.
        let text = ((agent.answers["2"]?["result"] as? [String: Any])?["content"] as? [[String: Any]])?.first?["text"] as? String ?? ""
        #expect(text.contains("(id: generator, channel: manuals)"), "\(text)")
        // Status says each channel's freshness too, a line each, as the `channel` description
        // promises ("status lists them").
        let status = (((agent.answers["3"]?["result"] as? [String: Any])?["content"] as? [[String: Any]])?.first?["text"] as? String ?? "")
            .split(separator: "\n").map(String.init)
        #expect(status.count == 2 && status[0].hasPrefix("Knowledge base version 2 (channel field)")
                && status[1].hasPrefix("Knowledge base version 1 (channel manuals)"), "\(status)")

        // Each channel rolls back on its own: manuals takes version 3 from its publisher, then
        // goes back to 1 (cairn rollback --channel) while field stays on 2; export works per channel.
        let third = try await onThread { try manuals.tryPublish(Self.manuals + [("radio", "Keep a crank radio.")], keys: [manuals.key],
                                                                 channel: "manuals") }
        try #require(third.status == 0, "\(third.error)")
        #expect(try device.cairn(["sync"]).status == 0)
        try await waitUntil("manuals serves version 3", seconds: 60) { Self.channels(device)["manuals"]?["version"] as? Int == 3 }
        // Both channels now hold a chunk "radio": a result's channel reads the right one.
        func chunk(_ query: String) async throws -> [String: Any] {
            let run = try await CairnTestSupport.run("/usr/bin/curl", ["-s", "--unix-socket", device.socket, "http://localhost/v1/chunks/radio" + query])
            return (try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8))) as? [String: Any] ?? [:]
        }
        let own = try await chunk(""), other = try await chunk("?channel=manuals")
        #expect(own["channel"] as? String == "field" && (own["content"] as? String)?.hasPrefix("A crank radio") == true, "\(own)")
        #expect(other["channel"] as? String == "manuals" && other["content"] as? String == "Keep a crank radio." && other["version"] as? Int == 3,
                "\(other)")
        #expect(try await chunk("?channel=nope")["code"] as? String == "unknown_channel")
        let got = try device.cairn(["get", "radio", "--channel", "manuals"])
        #expect(got.status == 0 && got.output.contains("Keep a crank radio.") && got.output.contains("channel manuals"), "\(got.output)")
        let read = try await AgentTests.mcp(device.socket, [
            #"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get","arguments":{"id":"radio","channel":"manuals"}}}"#,
        ], folder: field.folder)
        let passage = (read.answers["1"]?["result"] as? [String: Any])?["structuredContent"] as? [String: Any]
        #expect(passage?["content"] as? String == "Keep a crank radio." && passage?["channel"] as? String == "manuals", "\(String(describing: passage))")
        // `"channels": null` is refused, not read as every channel.
        #expect(try await Self.search(device, #"{"query": "radio", "channels": null}"#)["code"] as? String == "bad_channels")
        let back = try device.cairn(["rollback", "--channel", "manuals"])
        #expect(back.status == 0 && back.output.contains("to version 1"), "\(back.error)")
        #expect(Self.channels(device)["manuals"]?["version"] as? Int == 1 && Self.channels(device)["field"]?["version"] as? Int == 2)
        let usb = field.folder + "/manuals-usb"
        #expect(try device.cairn(["export", "--to", usb, "--channel", "manuals"]).status == 0)
        #expect(FileManager.default.fileExists(atPath: usb + "/channels/manuals/manifest.json"))
        #expect(try device.cairn(["rollback", "--channel", "nope"]).status == 1)

        // manuals dropped from the configuration: its folder stays (a typo must not cost a
        // channel), said at start with its size, as nothing else counts or removes it.
        device.stop()
        let alone = try DeviceProcess(field, sources: [fieldURL], name: "alone", dataDirectory: device.dataDirectory)
        defer { alone.stop() }
        try await alone.waitForVersion(2)
        let said = alone.log.split(separator: "\n").first { $0.contains("/channels/manuals (") }.map(String.init) ?? ""
        #expect(said.contains("is a channel no longer followed") && !said.contains("(0 bytes)"), "\(alone.log)")
        #expect(FileManager.default.fileExists(atPath: device.dataDirectory + "/channels/manuals/current"))
    }
}
