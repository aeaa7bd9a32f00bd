import CairnTestSupport
import Foundation
import Testing

/// Private repositories against a real nginx with TLS: a CA, server and client certificates
/// made here with openssl, `ssl_verify_client on`, and HTTP basic (netrc) or bearer (token file)
/// authentication. The device installs with the right files, and otherwise reports
/// `unauthorized` or `tls` in one line while it keeps serving what it has.
@Suite("Private repositories: nginx with TLS, client certificates and credentials (real processes)", .offCooperativePool, .serialized)
struct PrivateRepositoryTests {
    /// A CA, a server certificate for 127.0.0.1 and a client certificate, in the workspace's
    /// `pki` folder (returned).
    static func makeCertificates(in workspace: Workspace) async throws -> String {
        let folder = workspace.folder + "/pki"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let openssl = try requireOrSkip(["/usr/bin/openssl"].first { FileManager.default.isExecutableFile(atPath: $0) },
                                        "openssl is not installed (apt-get install openssl)")
        func ssl(_ arguments: [String]) async throws {
            let done = try await run(openssl, arguments)
            try #require(done.status == 0, "openssl \(arguments.prefix(2).joined(separator: " ")): \(done.stderr)")
        }
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try await ssl(["req", "-x509"] + key + ["-keyout", folder + "/ca.key", "-out", folder + "/ca.pem", "-days", "2",
                                                 "-subj", "/CN=cairn test CA"])
        for (name, extensionLine) in [("server", "subjectAltName=IP:127.0.0.1"), ("client", "extendedKeyUsage=clientAuth")] {
            try extensionLine.write(toFile: folder + "/\(name).ext", atomically: true, encoding: .utf8)
            try await ssl(["req"] + key + ["-keyout", folder + "/\(name).key", "-out", folder + "/\(name).csr",
                                           "-subj", "/CN=\(name == "server" ? "127.0.0.1" : "device")"])
            try await ssl(["x509", "-req", "-in", folder + "/\(name).csr", "-CA", folder + "/ca.pem", "-CAkey", folder + "/ca.key",
                           "-CAcreateserial", "-out", folder + "/\(name).pem", "-days", "2", "-extfile", folder + "/\(name).ext"])
        }
        return folder
    }

    static func write(_ text: String, _ path: String) throws {
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// The cairnd config for `source` with the given files (nil: left out).
    static func config(source: String, _ files: [String: String?]) -> String {
        "[source \(source)]\n" + files.compactMap { key, value in value.map { "\(key) = \($0)" } }.sorted().joined(separator: "\n") + "\n"
    }

    /// A cairnd on `dataDirectory` whose config is `config`, `environment` added to its own;
    /// waits for an attempt that ends with `code` (nil: for version 1 to serve). Returns it running.
    static func device(_ workspace: Workspace, source: String, name: String, dataDirectory: String, config: String,
                       expecting code: String?, environment: [String: String] = [:]) async throws -> DeviceProcess {
        let folder = workspace.folder + "/" + name
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try write(config, folder + "/private.conf")
        let device = try DeviceProcess(workspace, sources: [source], name: name, dataDirectory: dataDirectory,
                                       trust: ["--trusted-key", workspace.publicKey, "--config", folder + "/private.conf"],
                                       environment: environment)
        do {
            if let code {
                try await waitUntil("the device reports \(code) on its socket", seconds: 60) {
                    // The data directory is shared: only an attempt this cairnd makes counts.
                    device.attemptsFinished > 0 && device.lastErrorCode == code
                }
            } else {
                try await device.waitForVersion(1)
            }
        } catch {
            device.stop()  // a device that never reported must not outlive the test
            throw error
        }
        return device
    }

    @Test("Given nginx with TLS, a client CA and basic auth, when a device has the right netrc, CA bundle and client certificate, then it installs; with a wrong password, no client certificate or no CA bundle, then it says unauthorized or tls in one line and keeps serving")
    func basicAuthAndMutualTLS() async throws {
        let workspace = try await Workspace.make()
        try await workspace.publishOnThread(Workspace.version1)
        let pki = try await Self.makeCertificates(in: workspace)
        try Self.write("device:{PLAIN}right-password\n", pki + "/htpasswd")
        let nginx = try Nginx(root: workspace.repo, tls: .init(certificate: pki + "/server.pem", key: pki + "/server.key"),
                              serverLines: "ssl_client_certificate \(pki)/ca.pem; ssl_verify_client on; "
                                  + "auth_basic cairn; auth_basic_user_file \(pki)/htpasswd;")
        defer { nginx.stop() }
        try Self.write("machine 127.0.0.1 login device password right-password\n", pki + "/netrc")
        try Self.write("machine 127.0.0.1 login device password wrong-password\n", pki + "/wrong-netrc")
        let data = workspace.folder + "/data"
        let right: [String: String?] = ["netrc_file": pki + "/netrc", "ca_bundle": pki + "/ca.pem",
                                        "client_cert": pki + "/client.pem", "client_key": pki + "/client.key"]

        // The right files: version 1 installs over HTTPS with both authentications.
        var device = try await Self.device(workspace, source: nginx.url, name: "right", dataDirectory: data,
                                           config: Self.config(source: nginx.url, right), expecting: nil)
        #expect(!device.log.contains("right-password"), "credentials never reach the log")
        device.stop()

        // Each wrong or missing file: one line with its code; version 1 still answers.
        var wrongPassword = right
        wrongPassword["netrc_file"] = pki + "/wrong-netrc"
        var noClientCertificate = right
        (noClientCertificate["client_cert"], noClientCertificate["client_key"]) = (String?.none, String?.none)
        var noCA = right
        noCA["ca_bundle"] = String?.none
        for (name, files, code, phrase) in [("bad-login", wrongPassword, "unauthorized", "HTTP 401"),
                                            ("no-client-cert", noClientCertificate, "tls", "client certificate"),
                                            ("no-ca", noCA, "tls", "ca_bundle")] {
            device = try await Self.device(workspace, source: nginx.url, name: name, dataDirectory: data,
                                           config: Self.config(source: nginx.url, files), expecting: code)
            let line = device.syncStatus["last_error"] as? String ?? ""
            #expect(line.contains(phrase) && !line.contains("\n"), "\(name): \(line)")
            #expect(try device.query("boil water", mode: "lexical").version == 1, "\(name): keeps serving")
            #expect(!device.log.contains("right-password") && !device.log.contains("wrong-password"))
            device.stop()
        }
    }

    /// Version 1 published and served by nginx over TLS, which answers 401 unless the request
    /// carries the token in `pki/token`; `before` and `after` are nginx lines around that check.
    static func bearerRepository(_ before: String = "", after: String = "") async throws -> (Workspace, pki: String, Nginx) {
        let workspace = try await Workspace.make()
        try await workspace.publishOnThread(Workspace.version1)
        let pki = try await makeCertificates(in: workspace)
        let nginx = try Nginx(root: workspace.repo, tls: .init(certificate: pki + "/server.pem", key: pki + "/server.key"),
                              serverLines: before + #"if ($http_authorization != "Bearer field-token-7f3a") { return 401; } "# + after)
        try write("field-token-7f3a\n", pki + "/token")
        return (workspace, pki, nginx)
    }

    @Test("Given nginx with TLS that wants a bearer token, when the device has the token file, then it installs; with another token, then unauthorized; with one the server answers 400 to (no client certificate involved), then http_status, not tls; the token never reaches the log")
    func bearerToken() async throws {
        let (workspace, pki, nginx) = try await Self.bearerRepository(#"if ($http_authorization = "Bearer malformed") { return 400; } "#)
        defer { nginx.stop() }
        try Self.write("someone-elses-token\n", pki + "/other-token")
        let data = workspace.folder + "/data"
        var device = try await Self.device(workspace, source: nginx.url, name: "token", dataDirectory: data,
                                           config: Self.config(source: nginx.url, ["token_file": pki + "/token", "ca_bundle": pki + "/ca.pem"]),
                                           expecting: nil)
        device.stop()
        device = try await Self.device(workspace, source: nginx.url, name: "other", dataDirectory: data,
                                       config: Self.config(source: nginx.url, ["token_file": pki + "/other-token", "ca_bundle": pki + "/ca.pem"]),
                                       expecting: "unauthorized")
        #expect(try device.query("boil water", mode: "lexical").version == 1)
        #expect(!device.log.contains("field-token-7f3a") && !device.log.contains("someone-elses-token"))
        device.stop()
        // A plain 400 over TLS (as S3 answers a malformed request): before 2026-12-05 it was
        // reported as a missing client certificate.
        try Self.write("malformed\n", pki + "/malformed-token")
        device = try await Self.device(workspace, source: nginx.url, name: "malformed", dataDirectory: data,
                                       config: Self.config(source: nginx.url, ["token_file": pki + "/malformed-token", "ca_bundle": pki + "/ca.pem"]),
                                       expecting: "http_status")
        defer { device.stop() }
        let line = device.syncStatus["last_error"] as? String ?? ""
        #expect(line.contains("HTTP 400") && !line.contains("client certificate"), "\(line)")
    }

    @Test("Given nginx with TLS and a bearer token that answers 403 for every blob (as a bucket answers for a key it does not hold when the credentials may not list it), when the device with the token syncs, then it fails as http_status naming s3:ListBucket, not as a refused login")
    func forbiddenBlobWithToken() async throws {
        let (workspace, pki, nginx) = try await Self.bearerRepository(after: #"if ($uri ~ "^/blobs/") { return 403; }"#)
        defer { nginx.stop() }
        let device = try await Self.device(workspace, source: nginx.url, name: "bucket", dataDirectory: workspace.folder + "/data",
                                           config: Self.config(source: nginx.url, ["token_file": pki + "/token", "ca_bundle": pki + "/ca.pem"]),
                                           expecting: "http_status")
        defer { device.stop() }
        let line = device.syncStatus["last_error"] as? String ?? ""
        #expect(line.contains("HTTP 403 for the blob with this device's credentials") && line.contains("s3:ListBucket"), "\(line)")
    }

    @Test("Given an https source that redirects to plain http, when the device syncs, then it refuses the redirect with http_status in one line, and the http server is never asked")
    func noDowngradeRedirect() async throws {
        let workspace = try await Workspace.make()
        try await workspace.publishOnThread(Workspace.version1)
        let pki = try await Self.makeCertificates(in: workspace)
        let plain = try Nginx(root: workspace.repo)
        defer { plain.stop() }
        let nginx = try Nginx(root: workspace.repo, tls: .init(certificate: pki + "/server.pem", key: pki + "/server.key"),
                              serverLines: "return 302 \(plain.url)$request_uri;")
        defer { nginx.stop() }
        let device = try await Self.device(workspace, source: nginx.url, name: "downgrade", dataDirectory: workspace.folder + "/data",
                                           config: Self.config(source: nginx.url, ["ca_bundle": pki + "/ca.pem"]),
                                           expecting: "http_status")
        defer { device.stop() }
        let line = device.syncStatus["last_error"] as? String ?? ""
        #expect(line.contains("redirected the manifest (HTTP 302) to a scheme not allowed") && !line.contains("\n"), "\(line)")
        #expect(plain.accessLog.isEmpty, "\(plain.accessLog)")
    }
}
