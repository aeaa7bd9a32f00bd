import CairnTestSupport
import Foundation
import Testing

/// Sources reached through a site's forward proxy (Fixtures/forward_proxy.py, a real process on
/// loopback): `proxy`, `proxy_auth_file` and `proxy_ca_bundle` in cairnd.conf, `proxy = none`
/// against the proxy environment, and the proxy's own refusals in one line while the device
/// keeps what it has. scripts/test exports `no_proxy=127.0.0.1,…` (no proxy of the environment
/// may come between the tests and their loopback servers): a proxy set in cairnd.conf is used
/// all the same.
@Suite("Proxies: a real forward proxy between the device and nginx (real processes)", .offCooperativePool, .serialized)
struct ProxyTests {
    typealias Private = PrivateRepositoryTests

    /// A login whose password holds what a URL would decode or split on.
    static let login = "site:pr%41xy:pa ss@91"

    /// The first source's entry in the device's status.
    static func source(of device: DeviceProcess) -> [String: Any] {
        (device.syncStatus["sources"] as? [[String: Any]])?.first ?? [:]
    }

    @Test("Given a proxy that asks for a login, when the device has none, then it says unauthorized naming proxy_auth_file; with the file (a password holding % : @ and a space), then it installs through the proxy (manifest and blob asked of it in absolute form), sending the login with each request, status names the proxy, and the password is shown nowhere; with the source down, the proxy's 502 is said as possibly the proxy's own; a proxy_ca_bundle beside the plain-HTTP proxy is said at start to be unused, once for two channels from that source")
    func plainHTTPThroughAnAuthenticatingProxy() async throws {
        let workspace = try await Workspace.make()
        try await workspace.publishOnThread(Workspace.version1)
        let origin = try Nginx(root: workspace.repo)
        defer { origin.stop() }
        let proxy = try ForwardProxy(auth: Self.login)
        defer { proxy.stop() }
        let data = workspace.folder + "/data"
        var device = try await Private.device(workspace, source: origin.url, name: "no-login", dataDirectory: data,
                                              config: "proxy = \(proxy.url)\n", expecting: "unauthorized")
        let line = device.syncStatus["last_error"] as? String ?? ""
        #expect(line.contains("HTTP 407") && line.contains("set proxy_auth_file") && line.contains(proxy.url) && !line.contains("\n"),
                "\(line)")
        #expect(device.status()["version"] is NSNull || device.status()["version"] == nil)
        #expect(origin.accessLog.isEmpty, "the proxy let a request through without a login: \(origin.accessLog)")
        device.stop()

        let refusedBefore = proxy.requests.filter { $0.status == 407 }.count
        try Private.write(Self.login + "\n", workspace.folder + "/proxy-login")
        device = try await Private.device(workspace, source: origin.url, name: "login", dataDirectory: data,
                                          config: "proxy = \(proxy.url)\nproxy_auth_file = \(workspace.folder)/proxy-login\n"
                                              + "proxy_ca_bundle = \(workspace.folder)/proxy-ca.pem\n"
                                              // A second channel from the same source, through the same proxy.
                                              + "[channel spare]\nsource = \(origin.url)\ntrusted_key = \(workspace.publicKey)\npoll_interval = 3600\n",
                                          expecting: nil)
        defer { device.stop() }
        // Left beside a plain-HTTP proxy (meant for TLS to it, or from another proxy): said once
        // for the source, not once per channel that follows it.
        let unused = device.log.split(separator: "\n").filter { $0.contains("proxy_ca_bundle \(workspace.folder)/proxy-ca.pem is not used") }
        #expect(unused.count == 1 && unused[0].contains("for \(origin.url): its proxy is http://"), "\(unused)")
        let passed = proxy.requests.filter { $0.status == 200 }.map(\.target)
        #expect(passed.contains { $0.hasPrefix(origin.url + "/channels/") && $0.hasSuffix("manifest.json") }, "\(passed)")
        #expect(passed.contains { $0.hasPrefix(origin.url + "/blobs/") }, "\(passed)")
        #expect(proxy.requests.allSatisfy { $0.method == "GET" || $0.method == "HEAD" }, "\(proxy.requests)")
        // The login goes with every request (Basic), not after a 407 that costs a round trip.
        #expect(proxy.requests.filter { $0.status == 407 }.count == refusedBefore, "\(proxy.requests)")
        #expect(Self.source(of: device)["proxy"] as? String == proxy.url, "\(Self.source(of: device))")
        let printed = try device.cairn(["status"]).output
        #expect(printed.contains("source      \(origin.url) healthy via proxy \(proxy.url)"), "\(printed)")
        let json = try device.cairn(["status", "--json"]).output
        for shown in [device.log, printed, json] { #expect(!shown.contains("pr%41xy") && !shown.contains("pa ss")) }

        // The source down behind the proxy: the proxy's 502 is said as possibly its own.
        origin.stop()
        #expect(try device.cairn(["sync", "--wait"]).status != 0)
        let down = device.syncStatus["last_error"] as? String ?? ""
        #expect(down.contains("HTTP 502") && down.contains("may be the proxy's own") && down.contains(proxy.url), "\(down)")
    }

    @Test("Given an https source behind a proxy that asks for a login, set in the source's section, when the device has no login, then the CONNECT's 407 is unauthorized; without the CA bundle, then tls for the source; with both, then it tunnels (CONNECT only, nothing in the clear) and installs")
    func httpsTunnel() async throws {
        let workspace = try await Workspace.make()
        try await workspace.publishOnThread(Workspace.version1)
        let pki = try await Private.makeCertificates(in: workspace)
        let nginx = try Nginx(root: workspace.repo, tls: .init(certificate: pki + "/server.pem", key: pki + "/server.key"))
        defer { nginx.stop() }
        let proxy = try ForwardProxy(auth: Self.login)
        defer { proxy.stop() }
        try Private.write(Self.login + "\n", workspace.folder + "/proxy-login")
        let data = workspace.folder + "/data"
        var device = try await Private.device(workspace, source: nginx.url, name: "no-login", dataDirectory: data,
                                              config: Private.config(source: nginx.url, ["proxy": proxy.url, "ca_bundle": pki + "/ca.pem"]),
                                              expecting: "unauthorized")
        var line = device.syncStatus["last_error"] as? String ?? ""
        #expect(line.contains("HTTP 407") && line.contains(proxy.url), "\(line)")
        #expect(proxy.requests.contains { $0.method == "CONNECT" && $0.status == 407 }, "\(proxy.requests)")
        device.stop()

        device = try await Private.device(workspace, source: nginx.url, name: "no-ca", dataDirectory: data,
                                          config: Private.config(source: nginx.url, ["proxy": proxy.url,
                                                                                     "proxy_auth_file": workspace.folder + "/proxy-login"]),
                                          expecting: "tls")
        line = device.syncStatus["last_error"] as? String ?? ""
        #expect(line.contains("TLS with the source") && line.contains("ca_bundle"), "\(line)")
        device.stop()

        device = try await Private.device(workspace, source: nginx.url, name: "tunnel", dataDirectory: data,
                                          config: Private.config(source: nginx.url, ["proxy": proxy.url, "ca_bundle": pki + "/ca.pem",
                                                                                     "proxy_auth_file": workspace.folder + "/proxy-login"]),
                                          expecting: nil)
        defer { device.stop() }
        #expect(proxy.requests.contains { $0.method == "CONNECT" && $0.target == "127.0.0.1:\(nginx.port)" && $0.status == 200 },
                "\(proxy.requests)")
        #expect(proxy.requests.allSatisfy { $0.method == "CONNECT" }, "an https request was sent to the proxy in the clear: \(proxy.requests)")
        #expect(await nginx.logged { _ in true })
    }

    @Test("Given an https:// proxy with a certificate from a private CA, when the device lacks proxy_ca_bundle, then tls names the proxy and proxy_ca_bundle; with it, then the device installs through the proxy")
    func httpsProxy() async throws {
        let workspace = try await Workspace.make()
        try await workspace.publishOnThread(Workspace.version1)
        let pki = try await Private.makeCertificates(in: workspace)
        let origin = try Nginx(root: workspace.repo)
        defer { origin.stop() }
        let proxy = try ForwardProxy(tls: (pki + "/server.pem", pki + "/server.key"))
        defer { proxy.stop() }
        let data = workspace.folder + "/data"
        var device = try await Private.device(workspace, source: origin.url, name: "no-ca", dataDirectory: data,
                                              config: "proxy = \(proxy.url)\n", expecting: "tls")
        let line = device.syncStatus["last_error"] as? String ?? ""
        #expect(line.contains("TLS with the proxy \(proxy.url)") && line.contains("proxy_ca_bundle") && !line.contains("\n"), "\(line)")
        #expect(origin.accessLog.isEmpty)
        device.stop()

        device = try await Private.device(workspace, source: origin.url, name: "ca", dataDirectory: data,
                                          config: "proxy = \(proxy.url)\nproxy_ca_bundle = \(pki)/ca.pem\n", expecting: nil)
        defer { device.stop() }
        #expect(!device.log.contains("proxy_ca_bundle \(pki)/ca.pem is not used"), "an https:// proxy uses its proxy_ca_bundle")
        #expect(proxy.requests.contains { $0.target.hasPrefix(origin.url + "/blobs/") && $0.status == 200 }, "\(proxy.requests)")
    }

    @Test("Given a proxy that is down, when the device syncs through it, then network names the proxy in one line; a source set to proxy = none goes direct past the proxy environment and past an unreadable proxy_auth_file, as does a source without proxy where the environment names none; a live proxy in the environment is used when cairnd.conf names none")
    func proxyDownAndTheEnvironment() async throws {
        let workspace = try await Workspace.make()
        try await workspace.publishOnThread(Workspace.version1)
        let origin = try Nginx(root: workspace.repo)
        defer { origin.stop() }
        let gone = try ForwardProxy()
        gone.stop()  // its port now refuses connections
        var device = try await Private.device(workspace, source: origin.url, name: "down", dataDirectory: workspace.folder + "/down-data",
                                              config: "proxy = \(gone.url)\n", expecting: "network")
        let line = device.syncStatus["last_error"] as? String ?? ""
        #expect(line.contains("through the proxy \(gone.url)") && !line.contains("\n"), "\(line)")
        #expect(origin.accessLog.isEmpty)
        device.stop()

        // libcurl reads http_proxy when cairnd.conf names no proxy; `none` overrides it, and a
        // login for the global proxy is not read for a source that goes direct.
        let direct = "proxy = \(gone.url)\nproxy_auth_file = \(workspace.folder)/no-such-login\n"
            + Private.config(source: origin.url, ["proxy": "none"])
        device = try await Private.device(workspace, source: origin.url, name: "direct", dataDirectory: workspace.folder + "/direct-data",
                                          config: direct, expecting: nil, environment: ["http_proxy": gone.url, "no_proxy": "", "NO_PROXY": ""])
        #expect(Self.source(of: device)["proxy"] as? String == "none")
        device.stop()

        // A login file for the environment's proxy, where the environment names none: the
        // source goes direct, and the file is not needed.
        device = try await Private.device(workspace, source: origin.url, name: "no-proxy", dataDirectory: workspace.folder + "/no-proxy-data",
                                          config: "proxy_auth_file = \(workspace.folder)/no-such-login\n", expecting: nil,
                                          environment: ["http_proxy": "", "https_proxy": "", "all_proxy": ""])
        device.stop()

        // An environment's no_proxy applies to its own proxy, so the tests' is cleared here; the
        // environment's proxy gets proxy_auth_file's login.
        let live = try ForwardProxy(auth: Self.login)
        defer { live.stop() }
        try Private.write(Self.login + "\n", workspace.folder + "/proxy-login")
        device = try await Private.device(workspace, source: origin.url, name: "environment",
                                          dataDirectory: workspace.folder + "/environment-data",
                                          config: "proxy_auth_file = \(workspace.folder)/proxy-login\n", expecting: nil,
                                          environment: ["http_proxy": live.url, "no_proxy": "", "NO_PROXY": ""])
        defer { device.stop() }
        #expect(live.requests.contains { $0.target.hasPrefix(origin.url + "/blobs/") && $0.status == 200 }, "\(live.requests)")
        let source = Self.source(of: device)
        #expect(source["url"] as? String == origin.url && source["proxy"] == nil, "status names no proxy cairnd.conf did not set: \(source)")
    }
}
