// CairnThreads: every thread Cairn runs outside Swift's cooperative pool, in one place.
//
// Swift's cooperative pool has one thread per core (two on the devices Cairn is for) and also
// runs the HTTP handlers of cairnd's socket and cairn-server. Work that blocks or computes
// for milliseconds runs on threads of its own, chosen by what it is:
//
// | work                                           | runs on                                   | type                |
// |------------------------------------------------|-------------------------------------------|---------------------|
// | a search: query embedding, dense scan, fusion  | cairnd's or cairn-server's search threads | `BoundedThreadPool` |
// | a search's lexical part, beside its dense part | Dispatch's global pool                    | `SideWork`          |
// | the encoder's matrix products of one query     | the caller and spinning helper threads    | `WorkerTeam`        |
// | install work: hash, inflate, apply, verify,    | a thread of its own per job, 10 nicer     | `BackgroundWork`    |
// |   fsync, rename, clean-up; opening a version   |   than the queries                        |                     |
// | libcurl transfers (`curl_easy_perform` blocks) | CairnSync's transfer queue, or an         | (`CurlTransfer`)    |
// |                                                |   install thread when it feeds an install |                     |
//
// OpenBLAS runs one thread per call (CairnBLAS sets it): concurrent searches are the
// parallelism, and a query's own products are split by `WorkerTeam`.
