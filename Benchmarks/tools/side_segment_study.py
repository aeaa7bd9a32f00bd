#!/usr/bin/env python3
"""What a delta's writes cost when they go into the big index (as `SnapshotWriter.apply` does
today) against a small file of their own beside it (a side segment, not built): the part of a
delta install that grows with the index at a million chunks (docs/scale.md, "A side segment,
its writes measured" and "Which part of a side segment buys what").

    python3 Benchmarks/tools/side_segment_study.py INDEX \\
        [--layout in-place|side-file|side-file-tomb|side-rows|side-table|side-fts] [--cache warm|cold]
        [--seed 1] [--rows 1000] [--work DIR] [--check-counts]

INDEX is any index cairnd installed (DATA_DIR/current/index.sqlite). docs/scale.md used version
1's of the bench's corpora, from a run of `Benchmarks/bench-scale` kept by setting
CAIRN_BENCH_WORK and replacing its per-size clean-up line (`rm -rf "$data" ...`) with `: kept`.
The given index is only read: each run copies it into --work (made if absent; default: a
temporary folder in the current one, on the disk to be measured, removed after), flushes the copy to disk, and with
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
  fsync of that file;
- side-file-tomb: side-file, and the text of every row it masks (the removed ones, and the
  rewritten ones' old text) indexed into a contentless FTS5 table of the side file, `tomb_fts`,
  with the snapshot's tokenizer. A word's live row count is then the base's, less the tomb's,
  plus the side's, all three counted by FTS5 on the device (docs/scale.md, "Which part of a
  side segment buys what");
- side-rows: only the rows go to the side file (its `chunks`); FTS5 is changed in place in the
  index (the masked rows' text deleted, the rewritten rows' new text indexed at their side
  rowids). Then an fsync of both files;
- side-table: as side-rows, but the side rows are a second table of the index itself,
  `chunks_side`, at the rowids they replace (a removed row there as a row with no id); the index's
  `chunks` is left as it is. Then an fsync of the index;
- side-fts: only the full-text index goes to the side file (the new text in a contentless
  `chunks_fts`, the masked text in `tomb_fts`); the rows are deleted and rewritten in place.
  Then an fsync of both files.

--check-counts (side-file-tomb and side-fts) then applies in-place to a second copy, the truth,
and checks that for every word of the truth and of the three tables the base's row count less
the tomb's plus the side's is the truth's, that the tokens (instances) add up the same way, and
that as many live rows remain; and for 200 two-word phrases drawn from the changed rows' text,
that the rows matching them add up likewise. That is every number BM25 takes from outside a row
(its IDF per word or phrase, the row count and the average length).

Prints one line: the rows' read, the transaction(s), the fsync(s) and the total, in
milliseconds; with --check-counts a second line, the counts compared.
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


def unindex(connection, row):
    """FTS5's 'delete' of `row`'s indexed text from the index's `chunks_fts`."""
    connection.execute("insert into chunks_fts(chunks_fts, rowid, title, content) values('delete', ?, ?, ?)",
                       (row[0], row[2], row[3]))


def index(connection, table, rowid, title, content):
    connection.execute(f"insert into {table}(rowid, title, content) values(?, ?, ?)", (rowid, title, content))


def insert_rewritten(connection, table, rowid, row):
    """`row` rewritten, as a row of `table` (the `chunks` columns) at `rowid`."""
    title, content, vector = rewritten(row)
    connection.execute(f"insert into {table}({COLUMNS}) values(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (rowid, row[1], title, content, *row[4:9], vector, row[10]))


def change_rows(connection, removed, changed):
    """The rows removed and rewritten in the index's `chunks`, in place."""
    for row in removed:
        connection.execute("delete from chunks where rowid = ?", (row[0],))
    for row in changed:
        title, content, vector = rewritten(row)
        connection.execute("update chunks set title = ?, content = ?, embedding = ? where rowid = ?",
                           (title, content, vector, row[0]))


def in_place(connection, removed, changed):
    """Each row's text unindexed and the row changed, then a rewritten row's text indexed, row
    by row (the order the figures in docs/scale.md were measured in)."""
    for row in removed:
        unindex(connection, row)
        change_rows(connection, [row], [])
    for row in changed:
        unindex(connection, row)
        change_rows(connection, [], [row])
        index(connection, "chunks_fts", row[0], *rewritten(row)[:2])


TOKENIZE = "tokenize = 'porter unicode61 remove_diacritics 2'"


def side_tables(connection, side, names):
    for (sql,) in connection.execute(
            f"select sql from sqlite_master where name in ({', '.join('?' * len(names))}) order by name", names):
        side.execute(sql)


def side_rows(side, changed, highest):
    """The rewritten rows into the side file's `chunks`, at rowids above the index's."""
    for offset, row in enumerate(changed, start=1):
        insert_rewritten(side, "chunks", highest + offset, row)


def tomb(side, masked):
    """The masked rows' text, indexed but not stored, in the side file's `tomb_fts`."""
    side.execute(f"create virtual table tomb_fts using fts5(title, content, content = '', {TOKENIZE})")
    for row in masked:
        index(side, "tomb_fts", row[0], row[2], row[3])


def side_file(connection, side, removed, changed, highest, with_tomb):
    side_tables(connection, side, ("chunks", "chunks_fts"))
    side.execute("begin")
    side_rows(side, changed, highest)
    for offset, row in enumerate(changed, start=1):
        index(side, "chunks_fts", highest + offset, *rewritten(row)[:2])
    if with_tomb:
        tomb(side, sorted(removed + changed))
    side.execute("commit")


def rows_aside(connection, side, removed, changed, highest):
    """side-rows: the rows to the side file, FTS5 changed in place."""
    side_tables(connection, side, ("chunks",))
    side.execute("begin")
    side_rows(side, changed, highest)
    side.execute("commit")
    connection.execute("begin")
    for row in sorted(removed + changed):
        unindex(connection, row)
    for offset, row in enumerate(changed, start=1):
        index(connection, "chunks_fts", highest + offset, *rewritten(row)[:2])
    connection.execute("commit")


def table_aside(connection, removed, changed):
    """side-table: the rows to a table of their own in the same file, FTS5 changed in place."""
    connection.execute("begin")
    connection.execute("create table chunks_side(rowid INTEGER PRIMARY KEY, id TEXT UNIQUE, title TEXT, content TEXT, "
                       "scenario TEXT, tags TEXT, source TEXT, content_hash TEXT, metadata_hash TEXT, embedding BLOB, "
                       "embedding_hash TEXT)")
    changed_rowids = {row[0] for row in changed}
    for row in sorted(removed + changed):
        unindex(connection, row)
        if row[0] in changed_rowids:
            insert_rewritten(connection, "chunks_side", row[0], row)
            index(connection, "chunks_fts", row[0], *rewritten(row)[:2])
        else:
            connection.execute("insert into chunks_side(rowid) values(?)", (row[0],))
    connection.execute("commit")


def text_aside(connection, side, removed, changed):
    """side-fts: the rows changed in place, the full-text index's change to the side file."""
    connection.execute("begin")
    change_rows(connection, removed, changed)
    connection.execute("commit")
    side.execute(f"create virtual table chunks_fts using fts5(title, content, content = '', {TOKENIZE})")
    side.execute("begin")
    for row in changed:
        index(side, "chunks_fts", row[0], *rewritten(row)[:2])
    tomb(side, sorted(removed + changed))
    side.execute("commit")


def vocabulary(connection, schema, table):
    """{word: (rows, instances)} of an FTS5 table, by fts5vocab."""
    name = f"temp.vocab_{schema}_{table}"
    connection.execute(f"create virtual table if not exists {name} using fts5vocab({schema}, {table}, row)")
    return {term: (rows, instances) for term, rows, instances in connection.execute(f"select term, doc, cnt from {name}")}


def matching(connection, table, phrase):
    return connection.execute(f"select count(*) from {table} where {table.split('.')[-1]} match ?", (phrase,)).fetchone()[0]


def check_counts(index, side_path, truth_path, removed, changed, seed, rows_changed_in_place):
    """Base less tomb plus side against the truth, for every word and for two-word phrases."""
    connection = sqlite3.connect(index)
    connection.execute("attach ? as side", (side_path,))
    connection.execute("attach ? as truth", (truth_path,))
    base, dead = vocabulary(connection, "main", "chunks_fts"), vocabulary(connection, "side", "tomb_fts")
    added, truth = vocabulary(connection, "side", "chunks_fts"), vocabulary(connection, "truth", "chunks_fts")
    differ = 0
    for word in set(base) | set(dead) | set(added) | set(truth):
        live = [b - d + a for b, d, a in zip(base.get(word, (0, 0)), dead.get(word, (0, 0)), added.get(word, (0, 0)))]
        differ += live != list(truth.get(word, (0, 0)))
    tokens = [sum(counts[1] for counts in table.values()) for table in (base, dead, added, truth)]
    rows = connection.execute("select (select count(*) from main.chunks), (select count(*) from truth.chunks)").fetchone()
    live_rows = rows[0] - (0 if rows_changed_in_place else len(removed))

    words = [word for row in removed + changed for text in (row[3], rewritten(row)[1])
             for word in text.split() if word.isalpha()]
    draw = random.Random(seed)
    phrases, phrases_differ = 0, 0
    while phrases < 200 and len(words) > 1:
        at = draw.randrange(len(words) - 1)
        phrase = f'"{words[at]} {words[at + 1]}"'
        live = (matching(connection, "main.chunks_fts", phrase) - matching(connection, "side.tomb_fts", phrase)
                + matching(connection, "side.chunks_fts", phrase))
        phrases_differ += live != matching(connection, "truth.chunks_fts", phrase)
        phrases += 1
    connection.close()
    print(f"counts: {len(truth)} words in the truth, {differ} differ; tokens {tokens[0] - tokens[1] + tokens[2]} "
          f"against {tokens[3]}; live rows {live_rows} against {rows[1]}; {phrases} phrases, {phrases_differ} differ")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index")
    parser.add_argument("--layout", choices=["in-place", "side-file", "side-file-tomb", "side-rows", "side-table", "side-fts"],
                        default="in-place")
    parser.add_argument("--cache", choices=["warm", "cold"], default="warm")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rows", type=int, default=1000, help="rows removed, and as many rewritten")
    parser.add_argument("--work", help="where the copy goes (default: a temporary folder in the current one)")
    parser.add_argument("--check-counts", action="store_true",
                        help="compare the live rows' counts with an in-place truth (side-file-tomb, side-fts)")
    arguments = parser.parse_args()
    if arguments.check_counts and arguments.layout not in ("side-file-tomb", "side-fts"):
        parser.error("--check-counts needs a layout with a tomb: side-file-tomb or side-fts")

    work = arguments.work or tempfile.mkdtemp(prefix="side-segment-", dir=".")
    os.makedirs(work, exist_ok=True)
    copy, side_path = os.path.join(work, "index.sqlite"), os.path.join(work, "side.sqlite")
    truth = os.path.join(work, "truth.sqlite")
    files = (copy, side_path, truth)
    try:
        for path in files:
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
        layout = arguments.layout
        if layout == "in-place":
            connection.execute("begin")
            in_place(connection, removed, changed)
            connection.execute("commit")
        elif layout == "side-table":
            table_aside(connection, removed, changed)
        else:
            side = scratch_connection(side_path)
            if layout == "side-rows":
                rows_aside(connection, side, removed, changed, highest)
            elif layout == "side-fts":
                text_aside(connection, side, removed, changed)
            else:
                side_file(connection, side, removed, changed, highest, with_tomb=layout == "side-file-tomb")
            side.close()
        applied = time.perf_counter()
        connection.close()
        written = {"in-place": [copy], "side-table": [copy], "side-file": [side_path],
                   "side-file-tomb": [side_path]}.get(layout, [copy, side_path])
        for path in written:
            fsync(path)
        done = time.perf_counter()
        size = os.path.getsize(copy) >> 20
        print(f"{layout} {arguments.cache} ({size} MiB index): read {1000 * (read - start):.0f} "
              f"apply {1000 * (applied - read):.0f} fsync {1000 * (done - applied):.0f} total {1000 * (done - start):.0f} ms")
        if arguments.check_counts:
            subprocess.run(["cp", arguments.index, truth], check=True)
            truth_connection = scratch_connection(truth)
            truth_connection.execute("begin")
            in_place(truth_connection, removed, changed)
            truth_connection.execute("commit")
            truth_connection.close()
            # side-fts changed the index's rows in place; its full-text index is the base's still.
            check_counts(copy, side_path, truth, removed, changed, arguments.seed, rows_changed_in_place=layout == "side-fts")
    finally:
        if arguments.work:
            for path in files:
                if os.path.exists(path):
                    os.unlink(path)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
