/// Which Cairn this build is. The documentation dates every change ("since 2026-12-06", "a
/// cairnd from before 2026-11-29"), so a build is named by the newest dated section of
/// CHANGELOG.md that it includes (a test holds the two equal), and says what it reads.
public enum CairnVersion {
    /// The newest date in CHANGELOG.md's section headings.
    public static let date = "2026-12-07"

    /// What a repository must be written in for this build to read it.
    public static var reads: String {
        "manifest format \(Manifest.currentFormatVersion), root format \(RootMetadata.currentFormatVersion), delta formats 1 and 2"
    }

    /// `--version`'s line after the program's name.
    public static var summary: String { "\(date) (reads \(reads))" }
}
