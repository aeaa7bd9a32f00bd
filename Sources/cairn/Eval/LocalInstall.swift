import CairnCore
import CairnPublish
import CairnStore
import Foundation

/// DEVELOPMENT FALLBACK (`cairn eval --install-locally`), until CairnSync is merged and cairnd
/// syncs by itself: writes the device data directory that a sync would leave, straight from the
/// repository's blobs (hash- and size-checked), so cairnd can start on it without a source:
///
///     DATA/versions/<n>/index.sqlite     the snapshot, decompressed
///     DATA/versions/<n>/manifest.json    the signed manifest bytes
///     DATA/versions/<n>/model -> ../../models/<sha256 of model.safetensors>
///     DATA/models/<sha256>/{model.safetensors, vocab.txt, config.json}
///     DATA/current -> versions/<n>
///
/// It does not verify the state root or run canaries; a real sync does. Remove this file when
/// the default path (a real cairnd sync) works everywhere.
enum LocalInstall {
    static func install(_ repository: EvalRepository, dataDirectory: String) throws(EvalFailure) {
        let manifest = repository.manifest
        let store = Repository(root: repository.root)
        let version = "versions/\(manifest.version)"
        let folder = dataDirectory + "/" + version
        do {
            try FileSystem.makeDirectory(folder)
            try store.extractSnapshot(of: manifest, to: folder + "/index.sqlite")
            try FileSystem.writeAtomically(try FileSystem.read(store.manifestPath(repository.channel)), to: folder + "/manifest.json")
            guard let weights = manifest.model.files.first(where: { $0.name == "model.safetensors" }) else {
                throw EvalFailure.io("the manifest names no model.safetensors")
            }
            let models = "models/\(weights.sha256.hex)"
            try FileSystem.makeDirectory(dataDirectory + "/" + models)
            for file in manifest.model.files {
                let bytes = try store.blob(file.sha256, size: file.size, what: "model file \(file.name)")
                try FileSystem.writeAtomically(bytes, to: dataDirectory + "/\(models)/\(file.name)")
            }
            try FileManager.default.createSymbolicLink(atPath: folder + "/model", withDestinationPath: "../../" + models)
            try FileManager.default.createSymbolicLink(atPath: dataDirectory + "/current", withDestinationPath: version)
        } catch let error as EvalFailure {
            throw error
        } catch let error as PublishError {
            throw .io("installing locally: \(error.message)")
        } catch let error as StoreError {
            throw .io("installing locally: \(error.message)")
        } catch {
            throw .io("installing locally: \(error)")
        }
    }
}
