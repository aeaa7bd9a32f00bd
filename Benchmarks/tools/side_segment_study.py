#!/usr/bin/env python3
"""What a delta's writes cost when they go into the big index (as `SnapshotWriter.apply` does
today) against a small file of their own beside it (a side segment, not built): the part of a
delta install that grows with the index at a million chunks (docs/scale.md, "A side segment").

    python3 Benchmarks/tools/side_segment_study.py INDEX \\
        [--layout in-place|side-file] [--cache warm|cold] [--seed 1] [--rows 1000] [--work DIR]

INDEX is any index cairnd installed (DATA_DIR/current/index.sqlite). docs/scale.md used version
1's of the bench's corpora, from a run of `Benchmarks/bench-scale` kept by setting
CAIRN_BENCH_WORK and replacing its per-size clean-up line (`rm -rf "$data" ...`) with `: kept`.
The given index is only read: each run copies it into --work (default: a temporary folder in the
current one, on the disk to be measured, removed after), flushes the copy to disk, and with
--cache cold drops it from the page cache (POSIX_FADV_DONTNEED). It then reads 2 x --rows live
rows drawn at random (the seed), one after another, and applies, in one transaction without a
journal, with secure_delete off, as cairnd's delta connection does:

- in-place: one half of them deleted and the other rewritten (text changed, a new vector), each
  with FTS5's 'delete' of the indexed text and, for a rewrite, the new text indexed at the same
  rowid, each half in rowid order (as SnapshotWriter orders a delta, so that FTS5 does not flush
  a segment at each rowid that goes down); then an fsync of the file. Two differences from
  cairnd: its read-ahead also reads, before the transaction, each row's id-index leaf, its FTS5
  document size and a removed row's neighbouring leaves (here the transaction reads them, which
  weighs in the cold figures); and it starts the file's writeback every 512 rows, so that there
  the transaction and the fsync overlap in part;
- side-file: nothing written to the copy. The rewritten rows go into a new file with the same
  `chunks` and `chunks_fts` tables at rowids above the index's; the removed and rewritten rows
  would be masked by the rows files, as the overlay already masks them for dense search. Then an
  fsync of that file. What the lexical side would need to stay exact is in docs/scale.md, not
  here.

Prints one line: the rows' read, the transaction, the fsync and the total, in milliseconds.
Python's sqlite3 is Debian's libsqlite3, the same library cairnd links.
"""
import argparse
import os
import random
import shutil
import sqlite3
import subprocess
import tempfile
import time

COLUMNS = "rowid, id, title, content, scenario, tags, source, content_hash, metadata_hash, embedding, embedding_hash"


def fsync(path):
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def drop_from_cache(path):
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(descriptor)


def scratch_connection(path):
    connection = sqlite3.connect(path, isolation_level=None)
    for pragma in ("journal_mode=off", "secure_delete=off", "synchronous=off"):
        connection.execute(f"pragma {pragma}")
    return connection


def pick_rows(connection, count, seed):
    """`count` live rows at random, in the order drawn."""
    highest = connection.execute("select max(rowid) from chunks").fetchone()[0]
    rows = []
    drawn = min(highest, 4 * count)
    for rowid in random.Random(seed).sample(range(1, highest + 1), drawn):
        row = connection.execute(f"select {COLUMNS} from chunks where rowid = ?", (rowid,)).fetchone()
        if row:
            rows.append(row)
            if len(rows) == count:
                return rows, highest
    raise SystemExit(f"fewer than {count} of the {drawn} rowids drawn hold a row: a smaller --rows")


def rewritten(row):
    return row[2], row[3] + " revised", os.urandom(len(row[9]))


def in_place(connection, removed, changed):
    for row in removed:
        connection.execute("insert into chunks_fts(chunks_fts, rowid, title, content) values('delete', ?, ?, ?)",
                           (row[0], row[2], row[3]))
        connection.execute("delete from chunks where rowid = ?", (row[0],))
    for row in changed:
        title, content, vector = rewritten(row)
        connection.execute("insert into chunks_fts(chunks_fts, rowid, title, content) values('delete', ?, ?, ?)",
                           (row[0], row[2], row[3]))
        connection.execute("update chunks set title = ?, content = ?, embedding = ? where rowid = ?",
                           (title, content, vector, row[0]))
        connection.execute("insert into chunks_fts(rowid, title, content) values(?, ?, ?)", (row[0], title, content))


def side_file(connection, side, changed, highest):
    for (sql,) in connection.execute("select sql from sqlite_master where name in ('chunks', 'chunks_fts') order by name"):
        side.execute(sql)
    side.execute("begin")
    for offset, row in enumerate(changed, start=1):
        title, content, vector = rewritten(row)
        side.execute(f"insert into chunks({COLUMNS}) values(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     (highest + offset, row[1], title, content, *row[4:9], vector, row[10]))
        side.execute("insert into chunks_fts(rowid, title, content) values(?, ?, ?)", (highest + offset, title, content))
    side.execute("commit")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index")
    parser.add_argument("--layout", choices=["in-place", "side-file"], default="in-place")
    parser.add_argument("--cache", choices=["warm", "cold"], default="warm")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rows", type=int, default=1000, help="rows removed, and as many rewritten")
    parser.add_argument("--work", help="where the copy goes (default: a temporary folder in the current one)")
    arguments = parser.parse_args()

    work = arguments.work or tempfile.mkdtemp(prefix="side-segment-", dir=".")
    copy, side_path = os.path.join(work, "index.sqlite"), os.path.join(work, "side.sqlite")
    try:
        for path in (copy, side_path):
            if os.path.exists(path):
                os.unlink(path)
        subprocess.run(["cp", arguments.index, copy], check=True)
        fsync(copy)
        if arguments.cache == "cold":
            drop_from_cache(copy)
        connection = scratch_connection(copy)

        start = time.perf_counter()
        rows, highest = pick_rows(connection, 2 * arguments.rows, arguments.seed)
        # Each half spread over the file, then in rowid order.
        removed, changed = sorted(rows[:arguments.rows]), sorted(rows[arguments.rows:])
        read = time.perf_counter()
        if arguments.layout == "in-place":
            connection.execute("begin")
            in_place(connection, removed, changed)
            connection.execute("commit")
        else:
            side = scratch_connection(side_path)
            side_file(connection, side, changed, highest)
            side.close()
        applied = time.perf_counter()
        connection.close()
        fsync(copy if arguments.layout == "in-place" else side_path)
        done = time.perf_counter()
        size = os.path.getsize(copy) >> 20
        print(f"{arguments.layout} {arguments.cache} ({size} MiB index): read {1000 * (read - start):.0f} "
              f"apply {1000 * (applied - read):.0f} fsync {1000 * (done - applied):.0f} total {1000 * (done - start):.0f} ms")
    finally:
        if arguments.work:
            for path in (copy, side_path):
                if os.path.exists(path):
                    os.unlink(path)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
