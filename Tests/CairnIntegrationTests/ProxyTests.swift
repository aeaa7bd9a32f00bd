import CairnTestSupport
import Foundation
import Testing

/// Sources reached through a site's forward proxy (Fixtures/forward_proxy.py, a real process on
/// loopback): `proxy` and `proxy_auth_file` in cairnd.conf, `proxy = none` against the proxy
/// environment, and the proxy's own refusals in one line while the device keeps what it has.
@Suite("Proxies: a real forward proxy between the device and nginx (real processes)", .offCooperativePool, .serialized)
struct ProxyTests {
    typealias Private = PrivateRepositoryTests
    /// scripts/test exports `no_proxy=127.0.0.1,…` so that no proxy of the environment comes
    /// between the tests and their loopback servers; libcurl applies it to a configured proxy
    /// too, so the devices here run without it.
    static let noExemptions = ["no_proxy": "", "NO_PROXY": ""]

    @Test("Given a proxy that asks for credentials, when the device has none, then it says unauthorized naming proxy_auth_file; with the file, then it installs through the proxy (manifest and blob asked of it in absolute form), sending the login with each request, and the password is in no log")
    func plainHTTPThroughAnAuthenticatingProxy() async throws {
        let workspace = try await Workspace.make()
        try await workspace.publishOnThread(Workspace.version1)
        let origin = try Nginx(root: workspace.repo)
        defer { origin.stop() }
        let proxy = try ForwardProxy(auth: "site:proxy-pass-91")
        defer { proxy.stop() }
        let data = workspace.folder + "/data"
        var device = try await Private.device(workspace, source: origin.url, name: "no-login", dataDirectory: data,
                                              config: "proxy = \(proxy.url)\n", expecting: "unauthorized",
                                              environment: Self.noExemptions)
        let line = device.syncStatus["last_error"] as? String ?? ""
        #expect(line.contains("HTTP 407") && line.contains("proxy_auth_file") && line.contains(proxy.url) && !line.contains("\n"), "\(line)")
        #expect(device.status()["version"] is NSNull || device.status()["version"] == nil)
        #expect(origin.accessLog.isEmpty, "the proxy let a request through without credentials: \(origin.accessLog)")
        device.stop()

        let refusedBefore = proxy.requests.filter { $0.status == 407 }.count
        try Private.write("site:proxy-pass-91\n", workspace.folder + "/proxy-login")
        device = try await Private.device(workspace, source: origin.url, name: "login", dataDirectory: data,
                                          config: "proxy = \(proxy.url)\nproxy_auth_file = \(workspace.folder)/proxy-login\n",
                                          expecting: nil, environment: Self.noExemptions)
        defer { device.stop() }
        let passed = proxy.requests.filter { $0.status == 200 }.map(\.target)
        #expect(passed.contains { $0.hasPrefix(origin.url + "/channels/") && $0.hasSuffix("manifest.json") }, "\(passed)")
        #expect(passed.contains { $0.hasPrefix(origin.url + "/blobs/") }, "\(passed)")
        #expect(proxy.requests.allSatisfy { $0.method == "GET" || $0.method == "HEAD" }, "\(proxy.requests)")
        let source = (device.syncStatus["sources"] as? [[String: Any]])?.first
        #expect(source?["proxy"] as? String == proxy.url, "\(String(describing: source))")
        let printed = try device.cairn(["status"]).output
        #expect(printed.contains("source      \(origin.url) healthy via proxy \(proxy.url)"), "\(printed)")
        // The login goes with every request (Basic), not after a 407 that costs a round trip.
        #expect(proxy.requests.filter { $0.status == 407 }.count == refusedBefore, "\(proxy.requests)")
        #expect(!device.log.contains("proxy-pass-91"))
    }

    @Test("Given an https source behind a proxy set in its [source] section, when the device syncs, then it tunnels with CONNECT, checks the server's certificate through the tunnel, and installs")
    func httpsTunnel() async throws {
        let workspace = try await Workspace.make()
        try await workspace.publishOnThread(Workspace.version1)
        let pki = try await Private.makeCertificates(in: workspace)
        let nginx = try Nginx(root: workspace.repo, tls: .init(certificate: pki + "/server.pem", key: pki + "/server.key"))
        defer { nginx.stop() }
        let proxy = try ForwardProxy()
        defer { proxy.stop() }
        let device = try await Private.device(workspace, source: nginx.url, name: "tunnel", dataDirectory: workspace.folder + "/data",
                                              config: Private.config(source: nginx.url, ["proxy": proxy.url, "ca_bundle": pki + "/ca.pem"]),
                                              expecting: nil, environment: Self.noExemptions)
        defer { device.stop() }
        #expect(proxy.requests.contains { $0.method == "CONNECT" && $0.target == "127.0.0.1:\(nginx.port)" && $0.status == 200 },
                "\(proxy.requests)")
        #expect(proxy.requests.allSatisfy { $0.method == "CONNECT" }, "an https request was sent to the proxy in the clear: \(proxy.requests)")
        #expect(!nginx.accessLog.isEmpty)
    }

    @Test("Given a proxy that is down, when the device syncs through it, then network names the proxy in one line; given the proxy environment pointing at it, then proxy = none for the source goes direct and installs, and a live proxy in the environment is used when cairnd.conf names none")
    func proxyDownAndTheEnvironment() async throws {
        let workspace = try await Workspace.make()
        try await workspace.publishOnThread(Workspace.version1)
        let origin = try Nginx(root: workspace.repo)
        defer { origin.stop() }
        let gone = try ForwardProxy()
        gone.stop()  // its port now refuses connections
        var device = try await Private.device(workspace, source: origin.url, name: "down", dataDirectory: workspace.folder + "/down-data",
                                              config: "proxy = \(gone.url)\n", expecting: "network",
                                              environment: Self.noExemptions)
        let line = device.syncStatus["last_error"] as? String ?? ""
        #expect(line.contains("through the proxy \(gone.url)") && !line.contains("\n"), "\(line)")
        #expect(origin.accessLog.isEmpty)
        device.stop()

        // libcurl reads http_proxy when cairnd.conf names no proxy; `none` overrides it.
        try Private.write(Private.config(source: origin.url, ["proxy": "none"]), workspace.folder + "/direct.conf")
        device = try DeviceProcess(workspace, sources: [origin.url], name: "direct", dataDirectory: workspace.folder + "/direct-data",
                                   trust: ["--trusted-key", workspace.publicKey, "--config", workspace.folder + "/direct.conf"],
                                   environment: Self.noExemptions.merging(["http_proxy": gone.url]) { $1 })
        try await device.waitForVersion(1)
        #expect((device.syncStatus["sources"] as? [[String: Any]])?.first?["proxy"] as? String == "none")
        device.stop()

        let live = try ForwardProxy()
        defer { live.stop() }
        device = try DeviceProcess(workspace, sources: [origin.url], name: "environment", dataDirectory: workspace.folder + "/environment-data",
                                   environment: Self.noExemptions.merging(["http_proxy": live.url]) { $1 })
        defer { device.stop() }
        try await device.waitForVersion(1)
        #expect(live.requests.contains { $0.target.hasPrefix(origin.url + "/blobs/") && $0.status == 200 }, "\(live.requests)")
        let source = (device.syncStatus["sources"] as? [[String: Any]])?.first ?? [:]
        #expect(source["url"] as? String == origin.url && source["proxy"] == nil, "status names no proxy cairnd.conf did not set: \(source)")
    }
}
