import CairnCore
import Testing

@Suite("SourceURL: what cairnd takes as a source, and a folder's file:// URL")
struct SourceURLTests {
    @Test("Given folder paths with spaces, '#', '%', '?' and non-ASCII names, then forFolder percent-encodes exactly those and keeps the slashes")
    func folderURLs() {
        #expect(SourceURL.forFolder("/media/usb/repo") == "file:///media/usb/repo")
        #expect(SourceURL.forFolder("/media/USB STICK/repo") == "file:///media/USB%20STICK/repo")
        #expect(SourceURL.forFolder("/mnt/a#1/b?c/100%") == "file:///mnt/a%231/b%3Fc/100%25")
        #expect(SourceURL.forFolder("/media/Clé") == "file:///media/Cl%C3%A9")
        #expect(SourceURL.problem(SourceURL.forFolder("/media/USB STICK #2")) == nil)
    }

    @Test("Given http(s) URLs with a host and absolute file:// URLs, then they are accepted; a bare folder, a relative file:// URL, a missing host, another scheme, white space, or a query or fragment is refused saying what to write")
    func problems() {
        for good in ["http://10.0.0.5:8080", "https://kb.example.org/repo/", "HTTPS://KB.EXAMPLE.ORG/repo", "file:///media/usb/repo",
                     "file:///media/USB%20STICK"] {
            #expect(SourceURL.problem(good) == nil, "\(good)")
        }
        #expect(SourceURL.problem("/media/usb")?.contains("write it as file:///media/usb") == true)
        #expect(SourceURL.problem("/media/USB STICK")?.contains("file:///media/USB%20STICK") == true)
        #expect(SourceURL.problem("file://media/usb")?.contains("not an absolute file:// URL") == true)
        #expect(SourceURL.problem("https:///repo")?.contains("names no host") == true)
        #expect(SourceURL.problem("ftp://mirror/repo")?.contains("must start with http://, https:// or file://") == true)
        #expect(SourceURL.problem("kb.example.org/repo")?.contains("must start with") == true)
        #expect(SourceURL.problem("file:///media/USB STICK")?.contains("percent-encode it: file:///media/USB%20STICK") == true)
        #expect(SourceURL.problem("https://kb.example.org/a b")?.contains("white space") == true)
        #expect(SourceURL.problem("https://kb.example.org/\u{7}")?.contains("control character") == true)
        // A storage account's signed URL: every path appended to it would land inside the query.
        #expect(SourceURL.problem("https://acct.blob.core.windows.net/repo?sv=2024&sig=x")?.contains("query or fragment") == true)
        #expect(SourceURL.problem("https://kb.example.org/repo#top")?.contains("query or fragment") == true)
        #expect(SourceURL.problem("file:///media/usb/a#1")?.contains("percent-encode it: file:///media/usb/a%231") == true)
    }

    @Test("Given text naming URLs with a user and password, then redactingPasswords hides each password (and a user without one, which may be a token) and keeps the user, the host and everything else; text without one comes back as it was")
    func passwordsRedacted() {
        #expect(SourceURL.redactingPasswords(in: "https://ops:s3cr;et@kb.example.org/repo") == "https://ops:***@kb.example.org/repo")
        #expect(SourceURL.redactingPasswords(in: "blob ab12… from http://u:p%40ss@10.0.0.5:8080/r does not match; next http://v:q@[::1]/r")
                == "blob ab12… from http://u:***@10.0.0.5:8080/r does not match; next http://v:***@[::1]/r")
        #expect(SourceURL.redactingPasswords(in: "https://ghp_token@kb.example.org/r") == "https://***@kb.example.org/r")
        // Passwords with characters a URL should have encoded are hidden whole.
        for raw in ["ab/cd+e=", "p?q#r", "x@y", "p'q", "p\"q<r>"] {
            #expect(SourceURL.redactingPasswords(in: "source https://dev:\(raw)@kb.example.org/repo refused")
                    == "source https://dev:***@kb.example.org/repo refused", "\(raw)")
        }
        for kept in ["https://kb.example.org/repo", "http://[::1]:8080/r/x@y", "https://kb.example.org:8443/repo?owner=ops@example.org",
                     "https://kb.example.org:8443/r,ops@example.org", "https://kb.example.org?x=a@b", "mail ops@example.org: see https://kb.example.org/a@b",
                     "file:///media/usb/a:b@c", "no URL: user:pass@host"] {
            #expect(SourceURL.redactingPasswords(in: kept) == kept, "\(kept)")
        }
    }

    @Test("Given sources in any case of scheme, then isHTTPS and filePath read them as problem accepts them; filePath undoes forFolder")
    func schemes() {
        #expect(SourceURL.isHTTPS("https://kb.example.org") && SourceURL.isHTTPS("HTTPS://KB.EXAMPLE.ORG"))
        #expect(!SourceURL.isHTTPS("http://kb.example.org") && !SourceURL.isHTTPS("file:///media/usb"))
        #expect(SourceURL.filePath(SourceURL.forFolder("/media/USB STICK #1/100%")) == "/media/USB STICK #1/100%")
        #expect(SourceURL.filePath("FILE:///media/usb") == "/media/usb")
        #expect(SourceURL.filePath("https://kb.example.org/repo") == nil)
    }
}
