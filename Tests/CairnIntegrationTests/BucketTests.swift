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

@Suite("An S3-compatible bucket as a source: real processes", .offCooperativePool, .serialized)
struct BucketTests {
    @Test("Given the repository pushed with aws s3 sync to moto's S3 server, when a device syncs from the bucket's HTTP endpoint, then it installs, answers, and polls the manifest conditionally")
    func syncFromBucket() async throws {
        let moto = try requireOrSkip(S3Tools.moto, S3Tools.missing), aws = try requireOrSkip(S3Tools.aws, S3Tools.missing)
        try Tools.requireCurl()
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
        let motoFolder = workspace.folder + "/moto"
        try FileManager.default.createDirectory(atPath: motoFolder, withIntermediateDirectories: true)
        let (server, port) = try await onThread {
            try startOnFreePort(seconds: 60) { try launch(moto, ["-H", "127.0.0.1", "-p", "\($0)"], logDirectory: motoFolder) }
        }
        defer { stopProcess(server) }
        let endpoint = "http://127.0.0.1:\(port)"
        let environment = childEnvironment([
            "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": workspace.folder + "/no-aws-config",
        ])
        func s3(_ arguments: [String]) async throws {
            let done = try await run(aws, ["--endpoint-url", endpoint] + arguments, environment: environment)
            try #require(done.status == 0, "aws \(arguments.prefix(2).joined(separator: " ")): \(done.stderr)")
        }
        try await s3(["s3", "mb", "s3://cairn"])
        try await s3(["s3api", "put-bucket-policy", "--bucket", "cairn", "--policy", """
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": "*",
             "Action": "s3:GetObject", "Resource": "arn:aws:s3:::cairn/*"}]}
            """])

        // When the repository is pushed as the README says: everything but the manifests and
        // dotfiles, cached for a year; then the manifests, revalidated every time.
        try await s3(["s3", "sync", workspace.repo, "s3://cairn/repo", "--exclude", "*/manifest.json",
                      "--exclude", ".*", "--exclude", "*/.*", "--exclude", "staged/*",
                      "--cache-control", "public, max-age=31536000, immutable"])
        try await s3(["s3", "sync", workspace.repo, "s3://cairn/repo", "--exclude", "*", "--include", "*/manifest.json",
                      "--cache-control", "no-cache", "--content-type", "application/json"])

        // Then plain anonymous GETs see each object with its caching headers (GET: moto refuses
        // anonymous HEAD under a GetObject-only policy).
        let base = endpoint + "/cairn/repo"
        let blob = try workspace.blobs().snapshot
        let manifestHead = try await run("/usr/bin/curl", ["-sS", "-D", "-", "-o", "/dev/null", base + "/channels/field/manifest.json"]).stdout.lowercased()
        #expect(manifestHead.hasPrefix("http/1.1 200"))
        #expect(manifestHead.contains("cache-control: no-cache"))
        #expect(manifestHead.contains("content-type: application/json"))
        #expect(manifestHead.contains("etag: "))
        let blobHead = try await run("/usr/bin/curl", ["-sS", "-D", "-", "-o", "/dev/null", base + "/blobs/sha256/\(blob.prefix(2))/\(blob)"]).stdout.lowercased()
        #expect(blobHead.contains("cache-control: public, max-age=31536000, immutable"))
        let lock = try await run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", base + "/.publish.lock"])
        #expect(lock.stdout == "404" || lock.stdout == "403", "the publish lock stays out of the bucket")

        let staged = try await run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", base + "/staged/field/3.json"])
        #expect(staged.stdout == "404" || staged.stdout == "403", "staged manifests stay out of the bucket")

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
        let log = motoFolder + "/daemon.log"
        try await waitUntil("moto answers a manifest poll with 304", seconds: 30) {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
                .contains("GET /cairn/repo/channels/field/manifest.json HTTP/1.1\" 304")
        }
        #expect(try await onThread { device.status()["version"] as? Int } == 2)
        let rootVersion = try await onThread { (device.status()["trust"] as? [String: Any])?["root_version"] as? Int }
        #expect(rootVersion == 2)
    }
}
