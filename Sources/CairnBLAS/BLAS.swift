import COpenBLAS
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Why OpenBLAS cannot be used: the library is missing or lacks the CBLAS functions.
public struct BLASUnavailable: Error, CustomStringConvertible, Sendable {
    public let message: String
    public var description: String { message }
}

/// OpenBLAS, loaded at run time so that its kernels match this CPU.
///
/// Debian's OpenBLAS 0.3.21 is built with DYNAMIC_ARCH but does not recognise recent CPUs and
/// falls back to slow kernels. `OPENBLAS_CORETYPE` selects the kernels, but OpenBLAS reads it
/// once, in the constructor that runs when the library is loaded. Linking libopenblas into the
/// executable would run that constructor before `main`, so Cairn does not link it: the first use
/// of `BLAS.shared` sets `OPENBLAS_CORETYPE` and only then `dlopen`s the library. The core type is
/// `CAIRN_BLAS_CORETYPE` if set, else the best one for the CPU's features (AVX-512 → SkylakeX,
/// AVX2 → Haswell), else whatever `OPENBLAS_CORETYPE` already says (or OpenBLAS's own choice).
/// An inherited `OPENBLAS_CORETYPE` is overridden because it is a machine-wide setting made for
/// other programs, while the detection here is exact for this process.
public final class BLAS: Sendable {
    /// The process-wide instance; loading happens once, on first use.
    public static var shared: BLAS {
        get throws(BLASUnavailable) { try loaded.get() }
    }

    private static let loaded: Result<BLAS, BLASUnavailable> = Result { () throws(BLASUnavailable) in try BLAS() }

    /// The OpenBLAS kernel family in use, as OpenBLAS names it (e.g. "SkylakeX", "Haswell").
    public let coreName: String
    /// What Cairn set `OPENBLAS_CORETYPE` to, or nil if it left the inherited value (or none).
    public let chosenCoreType: String?

    // Function pointers resolved once with dlsym; C function pointers are immutable and the
    // library is never unloaded, so sharing them across threads is safe.
    private let sgemmFn: cairn_sgemm_fn
    private let sgemvFn: cairn_sgemv_fn
    private let setThreadsFn: cairn_set_num_threads_fn?
    private let getThreadsFn: cairn_get_num_threads_fn?

    /// Sets OpenBLAS's environment (`environment`) before any other thread runs: each
    /// program calls it first thing in `main`. `setenv` while another thread reads the
    /// environment (libcurl's, NIO's) can free what that thread reads; done here once, the
    /// library's load later sets nothing.
    public static func prepareEnvironment() { _ = environment }

    /// The core type set in `OPENBLAS_CORETYPE` (nil: the inherited value, or none) and the
    /// threads set in `OPENBLAS_NUM_THREADS`, each set once.
    private static let environment: (coreType: String?, threads: Int32) = {
        var chosen: String?
        let inherited = ProcessInfo.processInfo.environment
        if let coreType = inherited["CAIRN_BLAS_CORETYPE"].flatMap({ $0.isEmpty ? nil : $0 }) ?? BLAS.coreTypeForThisCPU() {
            setenv("OPENBLAS_CORETYPE", coreType, 1)
            chosen = coreType
        }
        // One thread per call: Cairn runs whole batches and queries in parallel instead (see
        // SentenceEmbedder.embed); CAIRN_BLAS_THREADS overrides. Said before loading too: the
        // constructor otherwise starts a thread per core, which spins on sched_yield for about
        // 0.1 s before it sleeps, taking a core from a start-up or an install beside it.
        let threads = inherited["CAIRN_BLAS_THREADS"].flatMap(Int32.init).map { max(1, $0) } ?? 1
        setenv("OPENBLAS_NUM_THREADS", "\(threads)", 1)
        return (chosen, threads)
    }()

    private init() throws(BLASUnavailable) {
        chosenCoreType = Self.environment.coreType
        let threads = Self.environment.threads
        let names = ["libopenblas.so.0", "libopenblas.so", "/usr/lib/x86_64-linux-gnu/libopenblas.so.0",
                     "/usr/lib/aarch64-linux-gnu/libopenblas.so.0", "libopenblas.dylib"]
        guard let handle = names.lazy.compactMap({ dlopen($0, RTLD_NOW | RTLD_LOCAL) }).first else {
            throw BLASUnavailable(message: "cannot load libopenblas (install libopenblas0 or libopenblas-dev)")
        }
        func symbol<T>(_ name: String, as type: T.Type) -> T? {
            guard let pointer = dlsym(handle, name) else { return nil }
            return unsafeBitCast(pointer, to: type)
        }
        guard let sgemm = symbol("cblas_sgemm", as: cairn_sgemm_fn.self),
              let sgemv = symbol("cblas_sgemv", as: cairn_sgemv_fn.self) else {
            throw BLASUnavailable(message: "libopenblas has no cblas_sgemm/cblas_sgemv")
        }
        sgemmFn = sgemm
        sgemvFn = sgemv
        setThreadsFn = symbol("openblas_set_num_threads", as: cairn_set_num_threads_fn.self)
        getThreadsFn = symbol("openblas_get_num_threads", as: cairn_get_num_threads_fn.self)
        setThreadsFn?(threads)
        if let corename = symbol("openblas_get_corename", as: cairn_get_corename_fn.self),
           let name = corename() {
            coreName = String(cString: name)
        } else {
            coreName = "unknown"
        }
    }

    /// The OpenBLAS core type for this CPU's instruction set, or nil to let OpenBLAS decide.
    /// AVX-512 (F, BW, VL, DQ) → SkylakeX; AVX2 + FMA → Haswell; otherwise OpenBLAS's own choice.
    static func coreTypeForThisCPU() -> String? {
        #if arch(x86_64)
        guard let info = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8),
              let flagsLine = info.split(separator: "\n").first(where: { $0.hasPrefix("flags") }) else {
            return nil
        }
        let flags = Set(flagsLine.split(separator: " ").map(String.init))
        if flags.isSuperset(of: ["avx512f", "avx512bw", "avx512vl", "avx512dq"]) { return "SkylakeX" }
        if flags.isSuperset(of: ["avx2", "fma"]) { return "Haswell" }
        #endif
        return nil
    }

    /// Threads OpenBLAS uses for one call.
    public var threads: Int {
        get { Int(getThreadsFn?() ?? 1) }
    }

    /// Sets the number of threads OpenBLAS uses (process-wide).
    public func setThreads(_ count: Int) {
        setThreadsFn?(Int32(max(1, count)))
    }

    /// C = alpha · op(A) · op(B) + beta · C, row-major. `transB` multiplies by Bᵀ (B stored as n×k).
    @inline(__always)
    public func sgemm(transA: Bool = false, transB: Bool = false, m: Int, n: Int, k: Int,
                      alpha: Float = 1, a: UnsafePointer<Float>, lda: Int,
                      b: UnsafePointer<Float>, ldb: Int,
                      beta: Float = 0, c: UnsafeMutablePointer<Float>, ldc: Int) {
        sgemmFn(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
                blasint(m), blasint(n), blasint(k), alpha, a, blasint(lda), b, blasint(ldb),
                beta, c, blasint(ldc))
    }

    /// y = alpha · op(A) · x + beta · y, row-major A (m×n).
    @inline(__always)
    public func sgemv(trans: Bool = false, m: Int, n: Int, alpha: Float = 1,
                      a: UnsafePointer<Float>, lda: Int, x: UnsafePointer<Float>,
                      beta: Float = 0, y: UnsafeMutablePointer<Float>) {
        sgemvFn(CblasRowMajor, trans ? CblasTrans : CblasNoTrans, blasint(m), blasint(n), alpha,
                a, blasint(lda), x, 1, beta, y, 1)
    }
}
