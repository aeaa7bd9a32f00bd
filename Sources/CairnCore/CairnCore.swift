/// CairnCore: content ids, manifest / delta / chunk models, state root, canonical encoding and
/// the sync decisions. No files, no network.
public enum CairnCore {
    /// The version of the repository format this build reads and writes.
    public static let formatVersion = 1
}
