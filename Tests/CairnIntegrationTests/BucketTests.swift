import CairnTestSupport
import Foundation
import Testing

/// moto's S3 server and the AWS CLI, from the Python venv that scripts/test makes
/// (`CAIRN_PYTHON` names its python; `moto_server` and `aws` lie beside it).
enum S3Tools {
    static let environment = ProcessInfo.processInfo.environment
    static var folder: String? {
        environment["CAIRN_PYTHON"].map { ($0 as NSString).deletingLastPathComponent }
    }
    static var moto: String? { folder.map { $0 + "/moto_server" }.flatMap(executable) }
    static var aws: String? { folder.map { $0 + "/aws" }.flatMap(executable) }
    static let missing = "moto_server and aws are not in the venv named by CAIRN_PYTHON; run the suite with scripts/test"

    private static func executable(_ path: String) -> String? {
        FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }
}

/// moto's S3 server on loopback holding a bucket `cairn` anyone may GET from, and the AWS CLI
/// pointed at it.
struct MotoBucket {
    let server: Process
    let endpoint: String
    /// moto's request log.
    let log: String
    let aws: String
    let environment: [String: String]
    /// The repository's URL in the bucket, as a device's source.
    var base: String { endpoint + "/cairn/repo" }

    static func start(in workspace: Workspace) async throws -> MotoBucket {
        let moto = try requireOrSkip(S3Tools.moto, S3Tools.missing), aws = try requireOrSkip(S3Tools.aws, S3Tools.missing)
        try Tools.requireCurl()
        let folder = workspace.folder + "/moto"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let (server, port) = try await onThread {
            try startOnFreePort(seconds: 60) { try launch(moto, ["-H", "127.0.0.1", "-p", "\($0)"], logDirectory: folder) }
        }
        let bucket = MotoBucket(server: server, endpoint: "http://127.0.0.1:\(port)", log: folder + "/daemon.log", aws: aws,
                                environment: childEnvironment([
                                    "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
                                    "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": workspace.folder + "/no-aws-config",
                                ]))
        do {
            try await bucket.s3(["s3", "mb", "s3://cairn"])
            try await bucket.s3(["s3api", "put-bucket-policy", "--bucket", "cairn", "--policy", """
                {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": "*",
                 "Action": "s3:GetObject", "Resource": "arn:aws:s3:::cairn/*"}]}
                """])
        } catch {
            stopProcess(server)
            throw error
        }
        return bucket
    }

    func s3(_ arguments: [String]) async throws {
        let done = try await run(aws, ["--endpoint-url", endpoint] + arguments, environment: environment)
        try #require(done.status == 0, "aws \(arguments.prefix(2).joined(separator: " ")): \(done.stderr)")
    }

    /// What docs/hosting.md's first `aws s3 sync` passes, besides its source and destination:
    /// everything but the manifests and dotfiles, cached for a year.
    static let immutables = ["--exclude", "*/manifest.json", "--exclude", ".*", "--exclude", "*/.*", "--exclude", "staged/*",
                             "--cache-control", "public, max-age=31536000, immutable"]

    /// Pushes `repo` as docs/hosting.md says: the manifests read first, then the immutable
    /// files, then those manifests, revalidated every time.
    func push(_ repo: String) async throws {
        let manifests = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: manifests) }
        let read = try await run("/bin/sh", ["-c", #"cd "$0" && find channels -name manifest.json -exec cp --parents {} "$1" \;"#, repo, manifests])
        try #require(read.status == 0, "copying the manifests: \(read.stderr)")
        try await s3(["s3", "sync", repo, "s3://cairn/repo"] + Self.immutables)
        try await s3(["s3", "sync", manifests, "s3://cairn/repo", "--exclude", "*", "--include", "*/manifest.json",
                      "--cache-control", "no-cache", "--content-type", "application/json"])
    }

    /// An anonymous GET of `path` under the repository: the status line and headers (lowercased), and the body.
    func get(_ path: String) async throws -> (head: String, body: String) {
        let body = FileManager.default.temporaryDirectory.appendingPathComponent("moto-get-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: body) }
        let head = try await run("/usr/bin/curl", ["-sS", "-D", "-", "-o", body, base + "/" + path]).stdout.lowercased()
        return (head, (try? String(contentsOfFile: body, encoding: .utf8)) ?? "")
    }

    func stop() { stopProcess(server) }
}

@Suite("An S3-compatible bucket as a source: real processes", .offCooperativePool, .serialized)
struct BucketTests {
    @Test("Given the repository pushed with aws s3 sync to moto's S3 server, when a device syncs from the bucket's HTTP endpoint, then it installs, answers, and polls the manifest conditionally")
    func syncFromBucket() async throws {
        _ = try requireOrSkip(S3Tools.moto, S3Tools.missing)
        let workspace = try await Workspace.make()
        // A root of trust rotated once (root 2 adds a signing key), so the bucket carries a chain.
        let rootKey = try await onThread { try workspace.keygen("root") }
        let second = try await onThread { try workspace.keygen("second") }
        try await onThread {
            try workspace.server(["root", "init", "--repo", workspace.repo, "--root-key", rootKey, "--signing-key", workspace.publicKey])
            try workspace.server(["root", "rotate", "--repo", workspace.repo, "--sign-with", rootKey,
                                  "--add-signing-key", String(second.dropLast(4)) + ".pub"])
        }
        let pinned = workspace.folder + "/provisioned-root.json"
        try FileManager.default.copyItem(atPath: workspace.repo + "/root/1.root.json", toPath: pinned)
        try await workspace.publishOnThread(DeviceFlowTests.version1)
        try await workspace.publishOnThread(DeviceFlowTests.version2)
        try await onThread { try workspace.publish([("staged", "A version still collecting signatures.")], keys: [], extra: ["--stage"]) }

        // Given moto's S3 server on loopback and a bucket anyone may GET from.
        let bucket = try await MotoBucket.start(in: workspace)
        defer { bucket.stop() }

        // When the repository is pushed as docs/hosting.md says.
        try await bucket.push(workspace.repo)

        // Then plain anonymous GETs see each object with its caching headers (GET: moto refuses
        // anonymous HEAD under a GetObject-only policy).
        let base = bucket.base
        let blob = try workspace.blobs().snapshot
        let manifestHead = try await bucket.get("channels/field/manifest.json").head
        #expect(manifestHead.hasPrefix("http/1.1 200"))
        #expect(manifestHead.contains("cache-control: no-cache"))
        #expect(manifestHead.contains("content-type: application/json"))
        #expect(manifestHead.contains("etag: "))
        let blobHead = try await bucket.get("blobs/sha256/\(blob.prefix(2))/\(blob)").head
        #expect(blobHead.contains("cache-control: public, max-age=31536000, immutable"))
        #expect(try await Self.absent(bucket, ".publish.lock"), "the publish lock stays out of the bucket")
        #expect(try await Self.absent(bucket, "staged/field/3.json"), "staged manifests stay out of the bucket")

        // And a device pinned to root 1, syncing from the bucket's HTTP endpoint, walks to root 2
        // (root 3 is absent: S3 answers 403 to an anonymous GET of a missing object), installs the
        // newest version and answers.
        let device = try DeviceProcess(workspace, sources: [base], trust: ["--trusted-root", pinned])
        defer { device.stop() }
        // (Every `cairn` call runs on a thread of its own: it blocks until the process exits.)
        try await waitUntil("cairnd serves version 2", seconds: 60) {
            (try? await onThread { device.status()["version"] as? Int }) == 2
        }
        #expect(try await onThread { try device.query("sandbags pyramid") }.ids.first == "sandbag")
        // Its next poll is conditional, and the bucket answers it with 304.
        #expect(try await onThread { try device.cairn(["sync"]) }.status == 0)
        let log = bucket.log
        try await waitUntil("moto answers a manifest poll with 304", seconds: 30) {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
                .contains("GET /cairn/repo/channels/field/manifest.json HTTP/1.1\" 304")
        }
        #expect(try await onThread { device.status()["version"] as? Int } == 2)
        let rootVersion = try await onThread { (device.status()["trust"] as? [String: Any])?["root_version"] as? Int }
        #expect(rootVersion == 2)
    }

    /// Whether `path` is not in the bucket: S3 answers 403 to an anonymous GET of a missing
    /// object under a GetObject-only policy (404 where listing is allowed).
    static func absent(_ bucket: MotoBucket, _ path: String) async throws -> Bool {
        let head = try await bucket.get(path).head
        return head.hasPrefix("http/1.1 403") || head.hasPrefix("http/1.1 404")
    }

    @Test("Given a bucket holding versions 1 to 4 and the repository pruned to the newest (--keep 1), when version 5 is published but not yet pushed and the bucket is synced with --delete as docs/hosting.md says, then the pruned blobs leave the bucket, version 4's blobs and the roots stay, the bucket's manifest stays version 4 with its headers (version 5's goes up only with the push), and a device installs version 4 from the bucket, then version 5 once it is pushed")
    func pruneReachesTheBucket() async throws {
        _ = try requireOrSkip(S3Tools.moto, S3Tools.missing)
        let workspace = try await Workspace.make()
        let rootKey = try await onThread { try workspace.keygen("root") }
        try await onThread {
            try workspace.server(["root", "init", "--repo", workspace.repo, "--root-key", rootKey, "--signing-key", workspace.publicKey])
        }
        for n in 1...4 { try await workspace.publishOnThread(PruneTests.kb(n)) }
        let bucket = try await MotoBucket.start(in: workspace)
        defer { bucket.stop() }
        try await bucket.push(workspace.repo)
        let pruned = try (1...3).map { try PruneTests.blobs(workspace, $0) }
        let kept = try PruneTests.blobs(workspace, 4)
        func path(_ hex: String) -> String { "blobs/sha256/\(hex.prefix(2))/\(hex)" }
        for blob in pruned.map(\.snapshot) { #expect(!(try await Self.absent(bucket, path(blob)))) }

        // The publisher prunes, then publishes version 5 (its manifest not pushed yet), then
        // deletes from the bucket what the repository no longer holds.
        let prune = try await onThread { try Binaries.run("cairn-server", ["prune", "--repo", workspace.repo, "--keep", "1"], in: workspace.folder) }
        try #require(prune.status == 0, "\(prune.error)")
        try await workspace.publishOnThread(PruneTests.kb(5))
        try await bucket.s3(["s3", "sync", workspace.repo, "s3://cairn/repo", "--delete"] + MotoBucket.immutables)

        for version in pruned {
            for blob in [version.snapshot] + version.deltas { #expect(try await Self.absent(bucket, path(blob)), "\(blob) stayed") }
        }
        for blob in [kept.snapshot] + kept.deltas + kept.model {
            #expect(try await bucket.get(path(blob)).head.hasPrefix("http/1.1 200"), "\(blob) went")
        }
        #expect(try await bucket.get("root/1.root.json").head.hasPrefix("http/1.1 200"))
        for n in 1...5 { #expect(try await bucket.get("channels/field/versions/\(n).json").head.hasPrefix("http/1.1 200")) }
        // The manifest is never sent up by this step: version 5's, sent before its blobs or
        // without its no-cache header, could reach a device or a cache first.
        let manifest = try await bucket.get("channels/field/manifest.json")
        #expect(manifest.head.contains("cache-control: no-cache"), "\(manifest.head)")
        let served = (try JSONSerialization.jsonObject(with: Data(manifest.body.utf8)) as? [String: Any])?["manifest"] as? [String: Any]
        #expect(served?["version"] as? Int == 4, "\(manifest.body.prefix(200))")

        let device = try DeviceProcess(workspace, sources: [bucket.base])
        defer { device.stop() }
        try await waitUntil("cairnd serves version 4 from the bucket", seconds: 60) {
            (try? await onThread { device.status()["version"] as? Int }) == 4
        }
        #expect(try await onThread { try device.query("shelter opens") }.ids.first == "notice")
        try await bucket.push(workspace.repo)
        #expect(try await onThread { try device.cairn(["sync", "--wait"]) }.status == 0)
        #expect(try await onThread { device.status()["version"] as? Int } == 5)
    }
}
