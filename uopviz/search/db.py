"""The tuning database: every search, every candidate it measured, and the best opts per complete cache key.

One SQLite file (standard library sqlite3; JSON for every structured value, never pickle), by default
`$UOPVIZ_CACHE_DIR/tuning.db`, else `~/.cache/uopviz/tuning.db`. WAL mode lets the CLI or the server read
while a search writes, and several processes write (each write waits up to BUSY_TIMEOUT_S for the lock).
docs/tuning-db.md describes the schema and the export format.

How a search uses it (opts are opaque JSON values here, e.g. [{"op": "SPLIT", "axis": 0, "arg": [4, ...]}]):

    key = CacheKey.of(node_id(ast), describe_target("CPU"), ACTION_SPACE_VERSION)
    with TuningDB() as db:
        if (hit := db.lookup(key)) is not None:
            return hit.opts                                  # tuned before: no search
        h = db.begin_search(key, kernel_name, ast_text, {"beam": 4})
        for each candidate:                                  # h.measured(opts): already done before a kill
            cid = db.add_candidate(h.id, parent_id, round, opts, program_hash, uop_count, compile_s,
                                   error, samples)           # one transaction each
        db.finish_search(h.id, best_cid)                     # marks it done, writes `results` atomically
        db.choose(h.id, other_cid, "why")                    # later: another of its candidates is the result

- `begin_search` resumes the newest unfinished ("running") search with the same key and params: a search
  stopped by Ctrl-C or kill -9 loses at most the candidate being written and continues where it was.
  `fail_search` marks one that cannot finish (it is then never resumed).
- `lookup`, `searches`, `search`, `candidates`, `results`, `kernel_ast` read, for the CLI and the server;
  `export_doc`/`import_doc` move everything between machines; `clear` empties the database.
- Every failure of the file itself (not a database, corrupt, a newer schema, unwritable, locked too long) is
  a TuningDBError whose message names the file and the way out. Wrong arguments (an unknown search, opts
  that are not JSON) are ValueErrors: they are bugs in the caller.

A TuningDB holds one connection: use it from the thread that opened it (a server opens one per request).
"""

from __future__ import annotations

import json
import math
import os
import socket
import sqlite3
import statistics
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from functools import cached_property, wraps
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from uopviz.runtime.cpu import cache_dir
from uopviz.runtime.trust import private_dirs
from uopviz.search.keys import CacheKey, TargetInfo
from uopviz.version import __version__

BUSY_TIMEOUT_S = 30.0
EXPORT_FORMAT = "uopviz-tuning-db"
EXPORT_VERSION = 1
STATUSES = ("running", "done", "failed")

MIGRATIONS: list[tuple[str, ...]] = [
    (  # 0 -> 1: the first schema
        """CREATE TABLE targets (
            id INTEGER PRIMARY KEY,
            device TEXT NOT NULL,
            device_name TEXT NOT NULL,
            driver TEXT NOT NULL,
            compiler TEXT NOT NULL,
            compiler_version TEXT NOT NULL,
            UNIQUE (device, device_name, driver, compiler, compiler_version))""",
        """CREATE TABLE kernels (
            id INTEGER PRIMARY KEY,
            hash TEXT NOT NULL UNIQUE,
            name TEXT NOT NULL,
            ast TEXT NOT NULL)""",
        """CREATE TABLE searches (
            id INTEGER PRIMARY KEY,
            uid TEXT NOT NULL UNIQUE,
            kernel_id INTEGER NOT NULL REFERENCES kernels(id) ON DELETE CASCADE,
            target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
            action_space_version INTEGER NOT NULL,
            uopviz_version TEXT NOT NULL,
            params TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed')),
            error TEXT,
            started_at REAL NOT NULL,
            finished_at REAL,
            best_candidate_id INTEGER REFERENCES candidates(id) ON DELETE SET NULL)""",
        "CREATE INDEX searches_by_key ON searches (kernel_id, target_id, status)",
        "CREATE INDEX searches_by_best ON searches (best_candidate_id)",
        """CREATE TABLE candidates (
            id INTEGER PRIMARY KEY,
            search_id INTEGER NOT NULL REFERENCES searches(id) ON DELETE CASCADE,
            parent_id INTEGER REFERENCES candidates(id) ON DELETE SET NULL,
            round INTEGER NOT NULL CHECK (round >= 0),
            opts TEXT NOT NULL,
            program_hash TEXT,
            uop_count INTEGER,
            compile_s REAL,
            error TEXT,
            samples TEXT NOT NULL,
            median_s REAL,
            created_at REAL NOT NULL)""",
        "CREATE INDEX candidates_by_search ON candidates (search_id, round)",
        "CREATE INDEX candidates_by_parent ON candidates (parent_id)",
        """CREATE TABLE results (
            kernel_id INTEGER NOT NULL REFERENCES kernels(id) ON DELETE CASCADE,
            target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
            action_space_version INTEGER NOT NULL,
            uopviz_version TEXT NOT NULL,
            opts TEXT NOT NULL,
            median_s REAL NOT NULL,
            search_id INTEGER REFERENCES searches(id) ON DELETE SET NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (kernel_id, target_id, action_space_version, uopviz_version))""",
        "CREATE INDEX results_by_search ON results (search_id)",
    ),
    (  # 1 -> 2: one process at a time searches a kernel on a target (the holder of its lease)
        """CREATE TABLE leases (
            kernel_id INTEGER NOT NULL REFERENCES kernels(id) ON DELETE CASCADE,
            target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
            search_id INTEGER NOT NULL REFERENCES searches(id) ON DELETE CASCADE,
            owner TEXT NOT NULL,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            acquired_at REAL NOT NULL,
            heartbeat_at REAL NOT NULL,
            PRIMARY KEY (kernel_id, target_id))""",
    ),
    (  # 2 -> 3: a search's summary (best so far, unoptimized time) read from indexes, not from every candidate
        "CREATE INDEX candidates_timed ON candidates (search_id, median_s, round) "
        "WHERE error IS NULL AND median_s IS NOT NULL",
        "CREATE INDEX candidates_roots ON candidates (search_id, round) WHERE parent_id IS NULL",
    ),
    (  # 3 -> 4: where each candidate was built and timed (a search on a Ray cluster uses several machines);
       # rows from before stay NULL: unknown
        "ALTER TABLE candidates ADD COLUMN built_on TEXT",
        "ALTER TABLE candidates ADD COLUMN measured_on TEXT",
    ),
    (  # 4 -> 5: why a finished search's result is another candidate than its own pick (`choose`); rows from
       # before stay NULL: the search's pick
        "ALTER TABLE searches ADD COLUMN chosen TEXT",
    ),
]
"""MIGRATIONS[v] takes a database from schema version v to v + 1 (PRAGMA user_version); append, never edit."""


class TuningDBError(RuntimeError):
    """The tuning database file cannot be used; the message names the file and what to do about it."""


class UnreadableDBError(TuningDBError):
    """The file is corrupt, not a database, or from a newer uopviz: `uopviz cache clear` may delete it."""


LEASE_STALE_S = 600.0
"""A lease whose holder has stored nothing for this long is taken over (a holder on this host whose process has
ended is taken over at once; one on another host can only be judged by its silence)."""


@dataclass(frozen=True)
class Lease:
    """Who is searching a kernel on a target: the search, its process (host and pid), since when, last heard."""

    search_id: int
    host: str
    pid: int
    acquired_at: float
    heartbeat_at: float

    def describe(self) -> str:
        since = time.strftime("%H:%M:%S", time.localtime(self.acquired_at))
        return f"process {self.pid} on {self.host} (search {self.search_id}, since {since})"

    def alive(self, now: float) -> bool:
        """Whether the holder may still be searching: heard from lately and, on this host, its process exists."""
        if now - self.heartbeat_at >= LEASE_STALE_S:
            return False
        if self.host != socket.gethostname() or self.pid == os.getpid():
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # another user's process
            return True
        return True


class SearchBusyError(RuntimeError):
    """Another live process holds the lease on this kernel and target: two searches at once would share one
    search's candidates and skew each other's timings. `lease` says who."""

    def __init__(self, lease: Lease, kernel_name: str, device: str) -> None:
        self.lease = lease
        super().__init__(f"{kernel_name} on {device} is being searched by {lease.describe()}; its result is used "
                         "once it ends")


def default_path() -> Path:
    """`$UOPVIZ_CACHE_DIR/tuning.db`, else `~/.cache/uopviz/tuning.db` (next to the compiled-kernel cache)."""
    return cache_dir() / "tuning.db"


@dataclass(frozen=True)
class Candidate:
    """One measured (or failed) kernel variant: samples are seconds per run, median_s None when it has none."""

    id: int
    search_id: int
    parent_id: int | None
    round: int
    opts: Any
    program_hash: str | None
    uop_count: int | None
    compile_s: float | None
    error: str | None
    samples: list[float]
    median_s: float | None
    created_at: float
    built_on: str | None = None
    """The machine (and Ray node) that lowered and compiled it; None for a re-timing or a row from before."""
    measured_on: str | None = None
    """The machine (and Ray node) that verified and timed it; None where it was not timed."""


@dataclass(frozen=True)
class SearchHandle:
    """A search begun or resumed; `candidates` are those measured before (empty for a new search)."""

    id: int
    resumed: bool
    candidates: list[Candidate]

    @cached_property
    def _by_opts(self) -> dict[str, Candidate]:
        return {_dumps(c.opts): c for c in self.candidates}

    def measured(self, opts: Any) -> Candidate | None:
        """The candidate already stored with these opts, so a resumed search need not build it again."""
        return self._by_opts.get(_dumps(opts))


@dataclass(frozen=True)
class SearchInfo:
    """A search as listed: best_median_s is its best candidate's time once it is done; leading_* is that candidate
    once done, else the fastest verified candidate so far (earliest on ties); unoptimized_s is the time of the
    kernel without opts."""

    id: int
    uid: str
    key: CacheKey
    kernel_name: str
    params: Any
    status: str
    error: str | None
    started_at: float
    finished_at: float | None
    best_candidate_id: int | None
    best_median_s: float | None
    n_candidates: int
    leading_id: int | None
    leading_s: float | None
    leading_opts: Any
    unoptimized_s: float | None
    chosen: str | None = None
    """Why its result is not the candidate it picked, but best_candidate_id (`TuningDB.choose`); None where it is."""


@dataclass(frozen=True)
class Result:
    """The best opts known for a cache key, with its time and the search that found it (None once cleared)."""

    key: CacheKey
    kernel_name: str
    opts: Any
    median_s: float
    search_id: int | None
    created_at: float
    measured_on: str | None = None
    """The machine (and Ray node) that timed the winning candidate, when the search that found it is here."""


P = ParamSpec("P")
R = TypeVar("R")


def _guarded(fn: Callable[Concatenate[TuningDB, P], R]) -> Callable[Concatenate[TuningDB, P], R]:
    """Turn sqlite3 errors from a method into TuningDBErrors that say what to do."""
    @wraps(fn)
    def wrapper(self: TuningDB, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(self, *args, **kwargs)
        except sqlite3.Error as e:
            raise _explain(self.path, e) from None
        except json.JSONDecodeError as e:  # only stored JSON is parsed here: the file was damaged
            raise _damaged(self.path, f"a malformed JSON value ({e})") from None
        except _MistypedError as e:  # SQLite keeps any value in any column: a REAL column may hold text
            raise _damaged(self.path, f"a malformed value ({e})") from None
        except RecursionError:  # stored JSON nested deeper than the parser goes
            raise _damaged(self.path, "a JSON value nested too deeply") from None
    return wrapper


def _damaged(path: Path, what: str) -> TuningDBError:
    return TuningDBError(f"the tuning database {path} holds {what}; `uopviz cache clear --db {path}` deletes every "
                         "search and result, or move the file aside")


class TuningDB:
    """An open tuning database (created and migrated on open); a context manager that closes it."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        self._conn = _open(self.path)
        self._owner = uuid.uuid4().hex  # names the leases this connection holds

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> TuningDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @_guarded
    def lookup(self, key: CacheKey) -> Result | None:
        """The stored result for exactly this key, or None (then the kernel has not been tuned here)."""
        row = self._conn.execute(
            f"{_RESULTS_SELECT} WHERE k.hash = ? AND t.device = ? AND t.device_name = ? AND t.driver = ? "
            "AND t.compiler = ? AND t.compiler_version = ? AND r.action_space_version = ? AND r.uopviz_version = ?",
            _key_values(key)).fetchone()
        return _result(row) if row else None

    @_guarded
    def begin_search(self, key: CacheKey, kernel_name: str, ast_text: str, params: Mapping[str, Any]) -> SearchHandle:
        """A new search for key, or the newest unfinished one with the same key and params with its candidates;
        either way this connection takes the kernel's lease on the target (held until finish_search, fail_search
        or release). SearchBusyError when another live process holds it."""
        params_json = _dumps(params, "params")
        now = time.time()
        with _transaction(self._conn) as c:
            kernel_id = _kernel_id(c, key.kernel_hash, kernel_name, ast_text)
            target_id = _target_id(c, key.target)
            held = c.execute("SELECT search_id, host, pid, acquired_at, heartbeat_at, owner FROM leases WHERE "
                             "kernel_id = ? AND target_id = ?", (kernel_id, target_id)).fetchone()
            if held is not None and held[5] != self._owner and (lease := _lease(held[:5])).alive(now):
                raise SearchBusyError(lease, kernel_name, key.target.device)
            handle = self._resume_or_start(c, kernel_id, target_id, key, params_json, now)
            c.execute("INSERT INTO leases (kernel_id, target_id, search_id, owner, host, pid, acquired_at, "
                      "heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (kernel_id, target_id) DO UPDATE "
                      "SET search_id = excluded.search_id, owner = excluded.owner, host = excluded.host, "
                      "pid = excluded.pid, acquired_at = excluded.acquired_at, heartbeat_at = excluded.heartbeat_at",
                      (kernel_id, target_id, handle.id, self._owner, socket.gethostname(), os.getpid(), now, now))
            return handle

    def _resume_or_start(self, c: sqlite3.Connection, kernel_id: int, target_id: int, key: CacheKey,
                         params_json: str, now: float) -> SearchHandle:
        row = c.execute("SELECT id FROM searches WHERE kernel_id = ? AND target_id = ? AND status = 'running' "
                        "AND action_space_version = ? AND uopviz_version = ? AND params = ? ORDER BY id DESC LIMIT 1",
                        (kernel_id, target_id, key.action_space_version, key.uopviz_version, params_json)).fetchone()
        if row:
            return SearchHandle(row[0], True, self._candidates(row[0]))
        cur = c.execute("INSERT INTO searches (uid, kernel_id, target_id, action_space_version, uopviz_version, "
                        "params, status, started_at) VALUES (?, ?, ?, ?, ?, ?, 'running', ?)",
                        (uuid.uuid4().hex, kernel_id, target_id, key.action_space_version, key.uopviz_version,
                         params_json, now))
        return SearchHandle(_rowid(cur), False, [])

    @_guarded
    def add_candidate(self, search_id: int, parent: int | None, round: int, opts: Any, program_hash: str | None,
                      uop_count: int | None, compile_s: float | None, error: str | None,
                      samples: Sequence[float], built_on: str | None = None, measured_on: str | None = None) -> int:
        """Store one candidate in its own transaction (a kill loses at most this one); returns its id.

        samples: seconds per timed run (empty when it did not compile or run; error says why); the median
        is computed here. built_on, measured_on: the machines (and workers) that built and timed it.
        """
        times = [_seconds(s, "samples") for s in samples]
        for what, n in (("round", round), ("uop_count", uop_count)):
            if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
                raise ValueError(f"{what}: expected an integer >= 0, got {n!r}")
        with _transaction(self._conn) as c:
            self._running(c, search_id)
            self._heartbeat(c, search_id)
            if parent is not None and c.execute("SELECT 1 FROM candidates WHERE id = ? AND search_id = ?",
                                                (parent, search_id)).fetchone() is None:
                raise ValueError(f"parent candidate {parent} is not in search {search_id}")
            cur = c.execute(
                "INSERT INTO candidates (search_id, parent_id, round, opts, program_hash, uop_count, compile_s, "
                "error, samples, median_s, created_at, built_on, measured_on) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (search_id, parent, round, _dumps(opts, "opts", canonical=False), program_hash, uop_count,
                 None if compile_s is None else _seconds(compile_s, "compile_s"), error, _dumps(times),
                 statistics.median(times) if times else None, time.time(), built_on, measured_on))
            return _rowid(cur)

    @_guarded
    def reject_candidate(self, search_id: int, candidate_id: int, error: str) -> None:
        """Mark a timed candidate of a running search wrong after all (a symbolic kernel's winner that fails at
        another value of its variables): its error says why, its samples stay, it has no time to win with."""
        with _transaction(self._conn) as c:
            self._running(c, search_id)
            self._heartbeat(c, search_id)
            c.execute("UPDATE candidates SET error = ?, median_s = NULL WHERE id = ? AND search_id = ?",
                      (error, candidate_id, search_id))

    @_guarded
    def finish_search(self, search_id: int, best_candidate_id: int) -> Result:
        """Mark the search done with its best candidate and make that the key's result, in one transaction.

        A key's result is the latest finished search's best (a new search only runs when asked to).
        """
        with _transaction(self._conn) as c:
            self._running(c, search_id)
            row = c.execute("SELECT opts, median_s FROM candidates WHERE id = ? AND search_id = ?",
                            (best_candidate_id, search_id)).fetchone()
            if row is None or row[1] is None:
                raise ValueError(f"candidate {best_candidate_id} is not a timed candidate of search {search_id}")
            _typed(row, (("candidates.opts", "json"), ("candidates.median_s", "real")))
            now = time.time()
            c.execute("UPDATE searches SET status = 'done', finished_at = ?, best_candidate_id = ? WHERE id = ?",
                      (now, best_candidate_id, search_id))
            c.execute("DELETE FROM leases WHERE search_id = ?", (search_id,))
            c.execute("INSERT INTO results (kernel_id, target_id, action_space_version, uopviz_version, opts, "
                      "median_s, search_id, created_at) SELECT kernel_id, target_id, action_space_version, "
                      "uopviz_version, ?, ?, id, ? FROM searches WHERE id = ? " + _UPSERT_RESULT,
                      (row[0], row[1], now, search_id))
            return _result(c.execute(f"{_RESULTS_SELECT} WHERE r.search_id = ?", (search_id,)).fetchone())

    @_guarded
    def choose(self, search_id: int, candidate_id: int, why: str) -> Result:
        """Make another timed candidate of a finished search its best and its key's result, saying why (a
        measurement the search could not make: whole-model tuning times its pick on a step's own buffers, where
        it may run slower than the kernel the step had). The key's result follows only where it is this
        search's (a later search's stays). ValueError for a search not done or a candidate not timed in it."""
        if not why:
            raise ValueError("choose needs a reason: the database shows why a result is not the search's pick")
        with _transaction(self._conn) as c:
            row = c.execute("SELECT status FROM searches WHERE id = ?", (search_id,)).fetchone()
            if row is None or row[0] != "done":
                raise ValueError(f"search {search_id} is {'unknown' if row is None else row[0]}, not done")
            row = c.execute("SELECT opts, median_s FROM candidates WHERE id = ? AND search_id = ? AND error IS NULL",
                            (candidate_id, search_id)).fetchone()
            if row is None or row[1] is None:
                raise ValueError(f"candidate {candidate_id} is not a timed candidate of search {search_id}")
            _typed(row, (("candidates.opts", "json"), ("candidates.median_s", "real")))
            c.execute("UPDATE searches SET best_candidate_id = ?, chosen = ? WHERE id = ?",
                      (candidate_id, why, search_id))
            c.execute("UPDATE results SET opts = ?, median_s = ?, created_at = ? WHERE search_id = ?",
                      (row[0], row[1], time.time(), search_id))
            return _result(c.execute(f"{_RESULTS_SELECT} WHERE r.search_id = ?", (search_id,)).fetchone())

    @_guarded
    def fail_search(self, search_id: int, error: str) -> None:
        """Mark a search that cannot finish as failed, with why; it is kept for inspection, never resumed."""
        with _transaction(self._conn) as c:
            self._running(c, search_id)
            c.execute("UPDATE searches SET status = 'failed', finished_at = ?, error = ? WHERE id = ?",
                      (time.time(), error, search_id))
            c.execute("DELETE FROM leases WHERE search_id = ?", (search_id,))

    @_guarded
    def release(self, search_id: int) -> None:
        """Give up this connection's lease on a search left running (interrupted: it is resumed later)."""
        with _transaction(self._conn) as c:
            c.execute("DELETE FROM leases WHERE search_id = ? AND owner = ?", (search_id, self._owner))

    @_guarded
    def lease(self, key: CacheKey) -> Lease | None:
        """Who holds the lease on key's kernel and target, if anyone (alive or not)."""
        row = self._conn.execute(
            "SELECT l.search_id, l.host, l.pid, l.acquired_at, l.heartbeat_at FROM leases l "
            "JOIN kernels k ON k.id = l.kernel_id JOIN targets t ON t.id = l.target_id WHERE k.hash = ? AND "
            "t.device = ? AND t.device_name = ? AND t.driver = ? AND t.compiler = ? AND t.compiler_version = ?",
            _key_values(key)[:6]).fetchone()
        return _lease(row) if row else None

    @_guarded
    def searches(self, kernel_hash: str | None = None, limit: int | None = None,
                 before: int | None = None) -> list[SearchInfo]:
        """Searches, newest first: of one kernel if kernel_hash is given, at most limit of them, only those whose id
        is below before (a page's cursor). Each summary is read from indexes, not from the candidates one by one."""
        rows = self._conn.execute(
            f"{_SEARCHES_SELECT} WHERE (:hash IS NULL OR k.hash = :hash) AND (:before IS NULL OR s.id < :before) "
            "ORDER BY s.id DESC LIMIT :limit", {"hash": kernel_hash, "before": before, "limit": -1 if limit is None
                                                else limit})
        return [_search(r) for r in rows]

    @_guarded
    def search(self, search_id: int) -> SearchInfo | None:
        row = self._conn.execute(f"{_SEARCHES_SELECT} WHERE s.id = ?", (search_id,)).fetchone()
        return _search(row) if row else None

    @_guarded
    def candidates(self, search_id: int) -> list[Candidate]:
        """A search's candidates by round, then in the order they were stored."""
        return self._candidates(search_id)

    @_guarded
    def results(self) -> list[Result]:
        """Every stored result, newest first."""
        return [_result(r) for r in self._conn.execute(f"{_RESULTS_SELECT} ORDER BY r.created_at DESC")]

    @_guarded
    def kernel_ast(self, kernel_hash: str) -> str | None:
        """The kernel's AST as text, for display."""
        row = self._conn.execute("SELECT ast FROM kernels WHERE hash = ?", (kernel_hash,)).fetchone()
        return _typed(row, (("kernels.ast", "text"),))[0] if row else None

    @_guarded
    def counts(self) -> dict[str, int]:
        """How many searches, candidates and results there are (read by SQL alone: it works on damaged rows)."""
        return {t: self._conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("searches", "candidates", "results")}

    @_guarded
    def clear(self) -> None:
        """Delete everything (rows, not the file: another process may have it open)."""
        with _transaction(self._conn) as c:
            for table in ("results", "searches", "kernels", "targets"):  # candidates go with their searches
                c.execute(f"DELETE FROM {table}")

    @_guarded
    def export_doc(self) -> dict[str, Any]:
        """Everything as one JSON-ready document (docs/tuning-db.md, "Export format"), from one snapshot."""
        with _transaction(self._conn, "DEFERRED") as c:
            return self._export(c)

    def _export(self, c: sqlite3.Connection) -> dict[str, Any]:
        kernels = [{"hash": h, "name": n, "ast": a} for h, n, a in c.execute("SELECT hash, name, ast FROM kernels")]
        searches, uids = [], {}
        for s in reversed(self.searches()):
            uids[s.id] = s.uid
            cands = self._candidates(s.id)
            searches.append({
                "uid": s.uid, "kernel_hash": s.key.kernel_hash, "target": _fields(s.key.target),
                "action_space_version": s.key.action_space_version, "uopviz_version": s.key.uopviz_version,
                "params": s.params, "status": s.status, "error": s.error, "started_at": s.started_at,
                "finished_at": s.finished_at, "best_candidate": s.best_candidate_id, "chosen": s.chosen,
                "candidates": [{"id": x.id, "parent": x.parent_id, "round": x.round, "opts": x.opts,
                                "program_hash": x.program_hash, "uop_count": x.uop_count, "compile_s": x.compile_s,
                                "error": x.error, "samples": x.samples, "created_at": x.created_at,
                                "built_on": x.built_on, "measured_on": x.measured_on}
                               for x in cands]})
        results = [{"key": _fields(r.key), "opts": r.opts, "median_s": r.median_s,
                    "search_uid": uids.get(r.search_id) if r.search_id is not None else None,
                    "created_at": r.created_at} for r in reversed(self.results())]
        return {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "uopviz_version": __version__,
                "exported_at": time.time(), "kernels": kernels, "searches": searches, "results": results}

    @_guarded
    def import_doc(self, doc: Any) -> dict[str, int]:
        """Merge an export_doc document, all or nothing; importing it again changes nothing.

        Searches already here (same uid) are skipped; for a key in both, the newer result wins. Returns
        counts: searches, candidates, results (imported) and skipped (searches already here). A document
        that is not a valid export raises ValueError naming the first bad field.
        """
        kernels, searches, results = _parse_export(doc)
        counts = {"searches": 0, "candidates": 0, "results": 0, "skipped": 0}
        with _transaction(self._conn) as c:
            kernel_ids = {h: _kernel_id(c, h, name, ast, replace=False) for h, (name, ast) in kernels.items()}
            for s in searches:
                if c.execute("SELECT 1 FROM searches WHERE uid = ?", (s["uid"],)).fetchone():
                    counts["skipped"] += 1
                    continue
                cur = c.execute(
                    "INSERT INTO searches (uid, kernel_id, target_id, action_space_version, uopviz_version, params, "
                    "status, error, started_at, finished_at, chosen) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (s["uid"], kernel_ids[s["kernel_hash"]], _target_id(c, s["target"]), s["action_space_version"],
                     s["uopviz_version"], _dumps(s["params"]), s["status"], s["error"], s["started_at"],
                     s["finished_at"], s["chosen"]))
                search_id, new_ids = _rowid(cur), dict[int, int]()
                for x in s["candidates"]:
                    new_ids[x["id"]] = _rowid(c.execute(
                        "INSERT INTO candidates (search_id, parent_id, round, opts, program_hash, uop_count, "
                        "compile_s, error, samples, median_s, created_at, built_on, measured_on) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (search_id, new_ids.get(x["parent"]), x["round"], _dumps(x["opts"], canonical=False),
                         x["program_hash"], x["uop_count"], x["compile_s"], x["error"], _dumps(x["samples"]),
                         statistics.median(x["samples"]) if x["samples"] else None, x["created_at"],
                         x["built_on"], x["measured_on"])))
                c.execute("UPDATE searches SET best_candidate_id = ? WHERE id = ?",
                          (new_ids.get(s["best_candidate"]), search_id))
                counts["searches"] += 1
                counts["candidates"] += len(s["candidates"])
            for r in results:
                k, found = r["key"], None
                if r["search_uid"] is not None:
                    found = c.execute("SELECT id FROM searches WHERE uid = ?", (r["search_uid"],)).fetchone()
                cur = c.execute(
                    "INSERT INTO results (kernel_id, target_id, action_space_version, uopviz_version, opts, median_s, "
                    "search_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) " + _UPSERT_RESULT +
                    " WHERE excluded.created_at > results.created_at",
                    (kernel_ids[k.kernel_hash], _target_id(c, k.target), k.action_space_version, k.uopviz_version,
                     _dumps(r["opts"], canonical=False), r["median_s"], found[0] if found else None, r["created_at"]))
                counts["results"] += cur.rowcount
        return counts

    def _candidates(self, search_id: int) -> list[Candidate]:
        rows = self._conn.execute(f"SELECT {_CANDIDATE_COLUMNS} FROM candidates WHERE search_id = ? "
                                  "ORDER BY round, id", (search_id,))
        return [_candidate(r) for r in rows]

    def _heartbeat(self, c: sqlite3.Connection, search_id: int) -> None:
        """Note that the holder is alive; a holder whose lease was taken over (silent too long) must stop."""
        if c.execute("UPDATE leases SET heartbeat_at = ? WHERE search_id = ? AND owner = ?",
                     (time.time(), search_id, self._owner)).rowcount == 0:
            raise ValueError(f"search {search_id} is not held by this connection: begin_search it first (a lease "
                             f"silent for {LEASE_STALE_S:.0f} s is taken over by another process)")

    @staticmethod
    def _running(c: sqlite3.Connection, search_id: int) -> None:
        row = c.execute("SELECT status FROM searches WHERE id = ?", (search_id,)).fetchone()
        if row is None or row[0] != "running":
            raise ValueError(f"search {search_id} is {'unknown' if row is None else row[0]}, not running")


_CANDIDATE_COLUMNS = ("id, search_id, parent_id, round, opts, program_hash, uop_count, compile_s, error, samples, "
                      "median_s, created_at, built_on, measured_on")
_KEY_COLUMNS = ("k.hash, t.device, t.device_name, t.driver, t.compiler, t.compiler_version, "
                "{0}.action_space_version, {0}.uopviz_version")
_RESULTS_SELECT = (f"SELECT {_KEY_COLUMNS.format('r')}, k.name, r.opts, r.median_s, r.search_id, r.created_at, "
                   "(SELECT c.measured_on FROM searches s JOIN candidates c ON c.id = s.best_candidate_id "
                   " WHERE s.id = r.search_id) "
                   "FROM results r JOIN kernels k ON k.id = r.kernel_id JOIN targets t ON t.id = r.target_id")
# The leading candidate is the winner once done, else the fastest verified one (index candidates_timed); the
# unoptimized time is the first verified root without opts (index candidates_roots).
_SEARCHES_SELECT = (
    f"SELECT {_KEY_COLUMNS.format('s')}, s.id, s.uid, k.name, s.params, s.status, s.error, s.started_at, "
    "s.finished_at, s.best_candidate_id, (SELECT median_s FROM candidates WHERE id = s.best_candidate_id), "
    "(SELECT count(*) FROM candidates WHERE search_id = s.id), lead.id, lead.median_s, lead.opts, "
    "(SELECT median_s FROM candidates WHERE search_id = s.id AND parent_id IS NULL AND opts = '[]' "
    " AND error IS NULL AND median_s IS NOT NULL ORDER BY round, id LIMIT 1), s.chosen "
    "FROM searches s JOIN kernels k ON k.id = s.kernel_id JOIN targets t ON t.id = s.target_id "
    "LEFT JOIN candidates lead ON lead.id = coalesce(s.best_candidate_id, "
    " (SELECT id FROM candidates WHERE search_id = s.id AND error IS NULL AND median_s IS NOT NULL "
    "  ORDER BY median_s, round, id LIMIT 1))")
_UPSERT_RESULT = ("ON CONFLICT (kernel_id, target_id, action_space_version, uopviz_version) DO UPDATE SET "
                  "opts = excluded.opts, median_s = excluded.median_s, search_id = excluded.search_id, "
                  "created_at = excluded.created_at")


def _key_values(key: CacheKey) -> tuple[Any, ...]:
    return tuple(getattr(key, f.name) for f in fields(CacheKey))


def _fields(obj: CacheKey | TargetInfo) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


def _result(row: Sequence[Any]) -> Result:
    row = _typed(row, _RESULT_TYPES)
    return Result(CacheKey(*row[:8]), row[8], json.loads(row[9]), *row[10:])


def _search(row: Sequence[Any]) -> SearchInfo:
    row = _typed(row, _SEARCH_TYPES)
    values = [row[8], row[9], CacheKey(*row[:8]), row[10], json.loads(row[11]), *row[12:21],
              None if row[21] is None else json.loads(row[21]), row[22], row[23]]  # in SearchInfo's order
    return SearchInfo(*values)


def _candidate(row: Sequence[Any]) -> Candidate:
    row = _typed(row, _CANDIDATE_TYPES)
    samples = json.loads(row[9])
    if not isinstance(samples, list) or not all(_is_number(t) for t in samples):
        raise _MistypedError(f"candidates.samples is {_short(samples)}, not a list of seconds")
    values = [*row[:4], json.loads(row[4]), *row[5:9], samples, *row[10:]]  # in Candidate's order
    return Candidate(*values)


def _lease(row: Sequence[Any]) -> Lease:
    return Lease(*_typed(row, _LEASE_TYPES))


class _MistypedError(Exception):
    """A stored value not of its column's type (SQLite's columns hold any type): the file was damaged or edited."""


# each read's columns in order, with their type: "text", "int", "real" (finite), "json" (text), "?" for nullable
_KEY_TYPES = (("kernels.hash", "text"), ("targets.device", "text"), ("targets.device_name", "text"),
              ("targets.driver", "text"), ("targets.compiler", "text"), ("targets.compiler_version", "text"),
              ("action_space_version", "int"), ("uopviz_version", "text"))
_RESULT_TYPES = (*_KEY_TYPES, ("kernels.name", "text"), ("results.opts", "json"), ("results.median_s", "real"),
                 ("results.search_id", "int?"), ("results.created_at", "real"), ("candidates.measured_on", "text?"))
_SEARCH_TYPES = (*_KEY_TYPES, ("searches.id", "int"), ("searches.uid", "text"), ("kernels.name", "text"),
                 ("searches.params", "json"), ("searches.status", "text"), ("searches.error", "text?"),
                 ("searches.started_at", "real"), ("searches.finished_at", "real?"),
                 ("searches.best_candidate_id", "int?"), ("candidates.median_s", "real?"), ("count", "int"),
                 ("candidates.id", "int?"), ("candidates.median_s", "real?"), ("candidates.opts", "json?"),
                 ("candidates.median_s", "real?"), ("searches.chosen", "text?"))
_CANDIDATE_TYPES = (("candidates.id", "int"), ("candidates.search_id", "int"), ("candidates.parent_id", "int?"),
                    ("candidates.round", "int"), ("candidates.opts", "json"), ("candidates.program_hash", "text?"),
                    ("candidates.uop_count", "int?"), ("candidates.compile_s", "real?"),
                    ("candidates.error", "text?"), ("candidates.samples", "json"), ("candidates.median_s", "real?"),
                    ("candidates.created_at", "real"), ("candidates.built_on", "text?"),
                    ("candidates.measured_on", "text?"))
_LEASE_TYPES = (("leases.search_id", "int"), ("leases.host", "text"), ("leases.pid", "int"),
                ("leases.acquired_at", "real"), ("leases.heartbeat_at", "real"))
_SQL_TYPES: dict[str, tuple[type, ...]] = {"text": (str,), "int": (int,), "real": (int, float), "json": (str,)}
_SQL_TYPE_NAMES = {"text": "text", "int": "an integer", "real": "a finite number", "json": "JSON text"}


def _typed(row: Sequence[Any], types: Sequence[tuple[str, str]]) -> Sequence[Any]:
    """row, checked value by value against types: _MistypedError names the first value of the wrong type."""
    for v, (column, kind) in zip(row, types, strict=True):
        base = kind.rstrip("?")
        if v is None and kind.endswith("?"):
            continue
        if not isinstance(v, _SQL_TYPES[base]) or (isinstance(v, float) and not math.isfinite(v)):
            found = "NULL" if v is None else f"a {len(v)}-byte blob" if isinstance(v, bytes) else \
                f"{'text' if isinstance(v, str) else type(v).__name__} {_short(v)}"
            raise _MistypedError(f"{column} is {found}, not {_SQL_TYPE_NAMES[base]}")
    return row


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _rowid(cur: sqlite3.Cursor) -> int:
    assert cur.lastrowid is not None  # an INSERT always has one
    return cur.lastrowid


def _kernel_id(c: sqlite3.Connection, kernel_hash: str, name: str, ast: str, replace: bool = True) -> int:
    """The kernel's row, created if new; replace: show the latest name and AST (naming may have changed)."""
    c.execute("INSERT INTO kernels (hash, name, ast) VALUES (?, ?, ?) ON CONFLICT (hash) DO "
              + ("UPDATE SET name = excluded.name, ast = excluded.ast" if replace else "NOTHING"),
              (kernel_hash, name, ast))
    return c.execute("SELECT id FROM kernels WHERE hash = ?", (kernel_hash,)).fetchone()[0]


def _target_id(c: sqlite3.Connection, t: TargetInfo) -> int:
    values = (t.device, t.device_name, t.driver, t.compiler, t.compiler_version)
    c.execute("INSERT INTO targets (device, device_name, driver, compiler, compiler_version) VALUES (?, ?, ?, ?, ?) "
              "ON CONFLICT DO NOTHING", values)
    return c.execute("SELECT id FROM targets WHERE device = ? AND device_name = ? AND driver = ? AND compiler = ? "
                     "AND compiler_version = ?", values).fetchone()[0]


def _dumps(value: Any, what: str = "value", canonical: bool = True) -> str:
    """Compact JSON; canonical (sorted keys) where equal values must give equal text, as resume matching needs."""
    try:
        return json.dumps(value, sort_keys=canonical, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what} must be JSON (lists, dicts, strings, finite numbers, booleans, null): {e}") from None


def _seconds(x: Any, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x < 0:
        raise ValueError(f"{what}: expected a finite number of seconds >= 0, got {x!r}")
    return float(x)


@contextmanager
def _transaction(conn: sqlite3.Connection, mode: str = "IMMEDIATE") -> Iterator[sqlite3.Connection]:
    """One transaction. IMMEDIATE (writes) takes the write lock up front, so two writers never deadlock
    upgrading a read lock; DEFERRED (reads) sees one snapshot while others write."""
    conn.execute(f"BEGIN {mode}")
    try:
        yield conn
    except BaseException:  # KeyboardInterrupt too: leave nothing half-written
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _explain(path: Path, e: sqlite3.Error) -> TuningDBError:
    """A TuningDBError for a sqlite3 error: what happened to which file, and the way out."""
    name = getattr(e, "sqlite_errorname", "")
    if name in ("SQLITE_NOTADB", "SQLITE_CORRUPT"):
        return UnreadableDBError(f"{path} is not a readable uopviz tuning database ({e}); delete it with "
                                 f"`uopviz cache clear --db {path}` or move it aside")
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return TuningDBError(f"the tuning database {path} stayed locked by another process for "
                             f"{BUSY_TIMEOUT_S:.0f} s ({e}); try again when that process is done")
    if name.startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_PERM", "SQLITE_IOERR", "SQLITE_FULL")):
        return TuningDBError(f"cannot write the tuning database {path} ({e}); make it writable, or set "
                             "UOPVIZ_CACHE_DIR (or pass --db) to a writable place")
    return TuningDBError(f"tuning database {path}: {e}")


def _open(path: Path) -> sqlite3.Connection:
    """Connect, check the file is ours and sound, switch to WAL, and migrate it to the current schema."""
    try:
        private_dirs(path.parent)  # 0700, as the compiled-kernel cache it usually shares a folder with
    except OSError as e:
        raise TuningDBError(f"cannot create the directory of the tuning database {path} ({e.strerror}); set "
                            "UOPVIZ_CACHE_DIR (or pass --db) to a writable place") from None
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error as e:
        raise _explain(path, e) from None
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise UnreadableDBError(
                f"{path} has tuning database schema version {version}, newer than this uopviz ({__version__}) "
                f"knows ({len(MIGRATIONS)}): upgrade uopviz, use another file (UOPVIZ_CACHE_DIR or --db), or "
                f"move it aside (`uopviz cache clear --db {path}` deletes it)")
        _quick_check(conn, path)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")  # in WAL mode: still consistent after a crash, fewer fsyncs
        if version < len(MIGRATIONS):
            _migrate(conn, path)
    except TuningDBError:
        conn.close()
        raise
    except sqlite3.Error as e:
        conn.close()
        raise _explain(path, e) from None
    return conn


_checked: set[tuple[int, ...]] = set()  # states (device, inode, size, mtime) of files found sound by this process


def _quick_check(conn: sqlite3.Connection, path: Path) -> None:
    """UnreadableDBError for a damaged file, found when it is opened rather than in the middle of a search. The
    check reads the whole file (about 2 ms per MB), so it runs once per state of the file per process: opening
    it again unchanged (a server's requests, realize's lookups) costs nothing; in WAL mode the file itself
    changes only at checkpoints."""
    try:
        st = path.stat()
    except OSError:
        return  # not there yet (sqlite3 makes it on first write)
    state = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if state in _checked:
        return
    problems = [r[0] for r in conn.execute("PRAGMA quick_check")]
    if problems != ["ok"]:
        raise UnreadableDBError(f"{path} is corrupt ({'; '.join(problems[:3])}); delete it with "
                                f"`uopviz cache clear --db {path}` or move it aside")
    _checked.add(state)


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Apply the missing migrations in one transaction (another process may have just applied them)."""
    with _transaction(conn):
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            raise TuningDBError(f"{path} is an SQLite database but not a uopviz tuning database (it has tables "
                                "and no tuning schema version); pass --db or set UOPVIZ_CACHE_DIR to use another file")
        for v in range(version, len(MIGRATIONS)):
            for statement in MIGRATIONS[v]:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")


def _parse_export(doc: Any) -> tuple[dict[str, tuple[str, str]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Check an export document field by field: (kernels by hash, searches, results with CacheKey keys)."""
    top = _obj(doc, "document")
    if top.get("format") != EXPORT_FORMAT:
        raise ValueError(f"not a uopviz tuning export (format is {top.get('format')!r}, not {EXPORT_FORMAT!r})")
    version = _take(top, "version", "int", "document")
    if version != EXPORT_VERSION:
        raise ValueError(f"export version {version} is not {EXPORT_VERSION}, the one this uopviz ({__version__}) "
                         "reads" + (": upgrade uopviz" if version > EXPORT_VERSION else ""))
    kernels: dict[str, tuple[str, str]] = {}
    for i, k in enumerate(_take(top, "kernels", "list", "document")):
        where = f"kernels[{i}]"
        k = _obj(k, where)
        kernels[_take(k, "hash", "str", where)] = (_take(k, "name", "str", where), _take(k, "ast", "str", where))
    searches = []
    for i, s in enumerate(_take(top, "searches", "list", "document")):
        where = f"searches[{i}]"
        s = _obj(s, where)
        out = {f: _take(s, f, kind, where) for f, kind in _SEARCH_FIELDS.items()} | \
            {f: _take(s, f, kind, where) if f in s else None for f, kind in _SEARCH_OPTIONAL.items()}
        if out["kernel_hash"] not in kernels:
            raise ValueError(f"{where}.kernel_hash: {out['kernel_hash']!r} is not in kernels")
        if out["status"] not in STATUSES:
            raise ValueError(f"{where}.status: expected one of {', '.join(STATUSES)}, got {out['status']!r}")
        out["target"] = TargetInfo(**{f.name: _take(_obj(out["target"], f"{where}.target"), f.name, "str",
                                                    f"{where}.target") for f in fields(TargetInfo)})
        cands, ids = [], set()
        for j, x in enumerate(out["candidates"]):
            cw = f"{where}.candidates[{j}]"
            x = _obj(x, cw)
            x = {f: _take(x, f, kind, cw) for f, kind in _CANDIDATE_FIELDS.items()} | \
                {f: _take(x, f, kind, cw) if f in x else None for f, kind in _CANDIDATE_OPTIONAL.items()}
            if x["id"] in ids or (x["parent"] is not None and x["parent"] not in ids):
                raise ValueError(f"{cw}: id {x['id']} repeats, or parent {x['parent']} is not an earlier candidate")
            for t in x["samples"]:
                _seconds(t, f"{cw}.samples")
            ids.add(x["id"])
            cands.append(x)
        if out["best_candidate"] is not None and out["best_candidate"] not in ids:
            raise ValueError(f"{where}.best_candidate: {out['best_candidate']} is not one of its candidates")
        out["candidates"] = cands
        searches.append(out)
    results = []
    for i, r in enumerate(_take(top, "results", "list", "document")):
        where = f"results[{i}]"
        r = {f: _take(_obj(r, where), f, kind, where) for f, kind in _RESULT_FIELDS.items()}
        kw = _obj(r["key"], f"{where}.key")
        r["key"] = CacheKey(**{f.name: _take(kw, f.name, "int" if f.name == "action_space_version" else "str",
                                             f"{where}.key") for f in fields(CacheKey)})
        if r["key"].kernel_hash not in kernels:
            raise ValueError(f"{where}.key.kernel_hash: {r['key'].kernel_hash!r} is not in kernels")
        results.append(r)
    return kernels, searches, results


_SEARCH_FIELDS = {"uid": "str", "kernel_hash": "str", "target": "dict", "action_space_version": "int",
                  "uopviz_version": "str", "params": "any", "status": "str", "error": "str?", "started_at": "num",
                  "finished_at": "num?", "best_candidate": "int?", "candidates": "list"}
_SEARCH_OPTIONAL = {"chosen": "str?"}  # added later: documents from before lack it
_CANDIDATE_FIELDS = {"id": "int", "parent": "int?", "round": "int", "opts": "any", "program_hash": "str?",
                     "uop_count": "int?", "compile_s": "num?", "error": "str?", "samples": "list", "created_at": "num"}
_CANDIDATE_OPTIONAL = {"built_on": "str?", "measured_on": "str?"}  # added later: documents from before lack them
_RESULT_FIELDS = {"key": "dict", "opts": "any", "median_s": "num", "search_uid": "str?", "created_at": "num"}
_KINDS: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "num": (int, float), "list": (list,),
                                       "dict": (dict,)}
_KIND_NAMES = {"str": "a string", "int": "an integer >= 0", "num": "a finite number >= 0", "list": "a list",
               "dict": "an object"}


def _obj(x: Any, where: str) -> dict[str, Any]:
    if not isinstance(x, dict):
        raise ValueError(f"{where}: expected an object, got {_short(x)}")
    return x


def _take(obj: dict[str, Any], key: str, kind: str, where: str) -> Any:
    """obj[key] if it is of kind ("str", "int", "num", "list", "dict", "any"; "?" allows null)."""
    if key not in obj:
        raise ValueError(f"{where}: missing {key!r}")
    v, base = obj[key], kind.rstrip("?")
    if base == "any" or (v is None and kind.endswith("?")):
        return v
    ok = isinstance(v, _KINDS[base]) and not isinstance(v, bool)
    if ok and base in ("int", "num"):
        ok = math.isfinite(v) and v >= 0
    if not ok:
        raise ValueError(f"{where}.{key}: expected {_KIND_NAMES[base]}{' or null' if kind.endswith('?') else ''}, "
                         f"got {_short(v)}")
    return v


def _short(v: Any) -> str:
    text = json.dumps(v, default=repr)
    return text if len(text) <= 40 else text[:37] + "..."
