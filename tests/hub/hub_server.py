"""A local stand-in for the Hugging Face Hub: the part of its HTTP API that huggingface_hub 2.x uses.

Standard library only. It serves creating repos, repo info, file trees, paths-info, preupload, the
NDJSON commit endpoint, basic LFS uploads (batch API + PUT), resolve (HEAD/GET with Range),
validate-yaml, whoami and refs, for model, dataset and space repos. Anything else gets the Hub's
own kind of 404 (a missing repo, revision or file carries the `X-Error-Code` header from which
huggingface_hub raises `RepositoryNotFoundError`, `RevisionNotFoundError` or
`RemoteEntryNotFoundError`); a route this server does not know is also recorded in
`LocalHub.unhandled`, so a client call that needs a missing endpoint fails loudly.

Clients reach it with `HF_ENDPOINT=<LocalHub.url>`, any `HF_TOKEN`, and `HF_HUB_DISABLE_XET=1`
(with hf_xet installed, uploads otherwise go through the Xet protocol): `LocalHub.client_env`.
"""

import base64
import hashlib
import json
import logging
import re
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from urllib.parse import parse_qs, unquote, urlsplit

logger = logging.getLogger(__name__)

USER = "fiber-tester"
REPO_TYPES = ("model", "dataset", "space")
DEFAULT_BRANCH = "main"

# The Hub stores a file in LFS when it is large, binary, or matches the repo's .gitattributes.
LFS_MIN_SIZE = 10 * 1024 * 1024
LFS_SUFFIXES = (".bin", ".safetensors", ".pt", ".pth", ".ckpt", ".h5", ".npy", ".npz", ".parquet", ".arrow")
GITATTRIBUTES = "".join(f"*{suffix} filter=lfs diff=lfs merge=lfs -text\n" for suffix in LFS_SUFFIXES)

# A revision that names a commit: 40 hex digits (huggingface_hub's REGEX_COMMIT_HASH).
COMMIT_HASH = re.compile(r"[0-9a-f]{40}")
# An LFS object id: a sha256 in hex. Anything else ("/etc/hostname", "../x") is refused before it
# can name a file of the host.
LFS_OID = re.compile(r"[0-9a-f]{64}")


def check_lfs_oid(oid) -> str:
    """`oid` if it is a sha256 in hex, else the Hub's 400."""
    if not isinstance(oid, str) or not LFS_OID.fullmatch(oid):
        raise HubError(400, f"Invalid LFS object id {oid!r}: expected 64 hex digits")
    return oid


def check_repo_path(path) -> str:
    """`path` if it is a relative path inside the repo (no "..", no absolute path, no empty part), else a 400."""
    parts = path.split("/") if isinstance(path, str) else []
    if not parts or path.startswith("/") or "\\" in path or any(part in ("", ".", "..") for part in parts):
        raise HubError(400, f"Invalid path in repo: {path!r}")
    return path


def git_blob_oid(content: bytes) -> str:
    """The git object id of a blob, as the Hub reports it in trees and ETags."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The git-lfs pointer file that git stores in place of an LFS file."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class StoredFile:
    """One file of a commit; its bytes live in the blob store under `sha256`."""

    size: int
    sha256: str
    lfs: bool

    @property
    def pointer(self) -> bytes:
        return lfs_pointer(self.sha256, self.size)

    def git_oid(self, content: bytes | None = None) -> str:
        """The blob id git gives this file: of the LFS pointer, or of the content itself."""
        return git_blob_oid(self.pointer if self.lfs else content)


@dataclass
class Commit:
    oid: str
    title: str
    message: str
    date: str
    parent: str | None
    files: dict[str, StoredFile]


@dataclass
class Repo:
    repo_type: str
    repo_id: str
    private: bool
    sdk: str | None
    created_at: str
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)

    def resolve(self, revision: str) -> Commit | None:
        """The commit a branch name or a full commit hash points to, or None."""
        if revision in self.branches:
            return self.commits[self.branches[revision]]
        return self.commits.get(revision) if COMMIT_HASH.fullmatch(revision) else None


@dataclass
class Fault:
    """A failure the test injects (`LocalHub.fail`): its status, the requests let through first, and how many fail."""

    status: int
    after: int = 0
    times: int | None = None
    seen: int = 0


class HubError(Exception):
    """An error answer in the Hub's format: status, `X-Error-Code` and `X-Error-Message`."""

    def __init__(self, status: int, message: str, code: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = headers or {}


def repo_not_found(repo_type: str, repo_id: str) -> HubError:
    return HubError(404, f"{repo_type.capitalize()} repository {repo_id} not found", "RepoNotFound")


class HubStore:
    """Repos with their commits in memory, file contents in a blob folder keyed by sha256."""

    def __init__(self, root: Path):
        self.blobs = root / "blobs"
        self.blobs.mkdir(parents=True, exist_ok=True)
        self.repos: dict[tuple[str, str], Repo] = {}
        self.lock = threading.Lock()

    def put_blob(self, content: bytes) -> str:
        sha256 = hashlib.sha256(content).hexdigest()
        path = self.blobs / sha256
        if not path.exists():
            partial = path.with_name(f"{sha256}.{threading.get_ident()}.partial")
            partial.write_bytes(content)
            partial.replace(path)
        return sha256

    def has_blob(self, sha256: str) -> bool:
        return (self.blobs / check_lfs_oid(sha256)).exists()

    def read_blob(self, sha256: str) -> bytes:
        return (self.blobs / check_lfs_oid(sha256)).read_bytes()

    def save(self, folder: Path) -> None:
        """Write the repos, their commits and files into `folder` (a new one), for `load` into another store."""
        shutil.copytree(self.blobs, folder / "blobs")
        repos = [asdict(repo) for repo in self.repos.values()]
        (folder / "repos.json").write_text(json.dumps(repos), encoding="utf-8")

    def load(self, folder: Path) -> None:
        """Add the repos that `save` wrote into `folder`, with their commits and files, to this store."""
        shutil.copytree(folder / "blobs", self.blobs, dirs_exist_ok=True)
        for fields in json.loads((folder / "repos.json").read_text(encoding="utf-8")):
            commits = {}
            for oid, commit in fields.pop("commits").items():
                files = {path: StoredFile(**stored) for path, stored in commit.pop("files").items()}
                commits[oid] = Commit(**commit, files=files)
            repo = Repo(**fields, commits=commits)
            self.repos[(repo.repo_type, repo.repo_id)] = repo

    def repo(self, repo_type: str, repo_id: str, authorized: bool) -> Repo:
        """The repo, or the Hub's RepoNotFound (private repos are invisible without a token)."""
        repo = self.repos.get((repo_type, repo_id))
        if repo is None or (repo.private and not authorized):
            raise repo_not_found(repo_type, repo_id)
        return repo

    def create_repo(self, repo_type: str, repo_id: str, private: bool, sdk: str | None) -> Repo:
        with self.lock:
            if (repo_type, repo_id) in self.repos:
                raise HubError(409, f"You already created this {repo_type} repo: {repo_id}")
            repo = Repo(repo_type, repo_id, private, sdk, created_at=now_iso())
            gitattributes = GITATTRIBUTES.encode()
            self._add_commit(
                repo,
                DEFAULT_BRANCH,
                "initial commit",
                "",
                {".gitattributes": StoredFile(len(gitattributes), self.put_blob(gitattributes), lfs=False)},
            )
            # Seen by other threads (a test polling the history) only with its main branch, as the Hub shows it.
            self.repos[(repo_type, repo_id)] = repo
            return repo

    def commit(self, repo: Repo, branch: str, operations: list[dict], header: dict) -> Commit:
        """Apply one NDJSON commit's operations on top of `branch`; all or nothing."""
        with self.lock:
            if branch not in repo.branches:
                raise HubError(404, f"Invalid rev id: {branch}", "RevisionNotFound")
            head = repo.commits[repo.branches[branch]]
            parent = header.get("parentCommit")
            if parent is not None and parent != head.oid:
                raise HubError(412, f"Parent commit {parent} is not the head of {branch} ({head.oid})")
            files = dict(head.files)
            for operation in operations:
                self._apply(files, operation["key"], operation["value"])
            return self._add_commit(repo, branch, header.get("summary", ""), header.get("description", ""), files)

    def _apply(self, files: dict[str, StoredFile], key: str, value: dict) -> None:
        path = value.get("path")
        check_repo_path(path.rstrip("/") if key == "deletedFolder" and isinstance(path, str) else path)
        if key == "file":
            if value.get("encoding", "base64") != "base64":
                raise HubError(400, f"Unsupported encoding {value['encoding']!r} for {path}")
            content = base64.b64decode(value["content"])
            files[path] = StoredFile(len(content), self.put_blob(content), lfs=False)
        elif key == "lfsFile":
            if not self.has_blob(value["oid"]):
                raise HubError(400, f"LFS object {value['oid']} for {path} was never uploaded")
            size = (self.blobs / check_lfs_oid(value["oid"])).stat().st_size
            files[path] = StoredFile(size, value["oid"], lfs=True)
        elif key == "deletedFile":
            if path not in files:
                raise HubError(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
            del files[path]
        elif key == "deletedFolder":
            prefix = path.rstrip("/") + "/"
            for name in [name for name in files if name.startswith(prefix)]:
                del files[name]
        else:
            raise HubError(400, f"Unsupported commit operation {key!r}")

    def _add_commit(self, repo: Repo, branch: str, title: str, message: str, files: dict) -> Commit:
        parent = repo.branches.get(branch)
        digest = hashlib.sha1(f"{repo.repo_type}/{repo.repo_id}\n{parent}\n{title}\n{time.time_ns()}".encode())
        for path, stored in sorted(files.items()):
            digest.update(f"\n{path}\0{stored.sha256}".encode())
        commit = Commit(digest.hexdigest(), title, message, now_iso(), parent, files)
        repo.commits[commit.oid] = commit
        repo.branches[branch] = commit.oid
        return commit


def folders_of(paths) -> set[str]:
    """Every folder that holds one of `paths` (files), at any depth."""
    return {str(parent) for path in paths for parent in PurePosixPath(path).parents if str(parent) != "."}


class HubRequestHandler(BaseHTTPRequestHandler):
    """Routes one request; `self.server.hub` is the owning LocalHub."""

    protocol_version = "HTTP/1.1"
    server_version = "FiberLocalHub/1.0"

    def log_message(self, format, *args):
        logger.debug("%s %s", self.address_string(), format % args)

    def do_GET(self):
        self._handle("GET")

    def do_HEAD(self):
        self._handle("HEAD")

    def do_POST(self):
        self._handle("POST")

    def do_PUT(self):
        self._handle("PUT")

    def do_DELETE(self):
        self._handle("DELETE")

    # Plumbing

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        self.query = parse_qs(url.query)
        segments = [unquote(segment) for segment in url.path.split("/")[1:]]
        try:
            self.body = self._read_body()
            status = self.server.hub.injected_failure(url.path)
            if status is not None:
                raise HubError(status, f"Failure injected by the test for {url.path!r}")
            route = self.server.hub.route(method, segments)
            if route is None:
                self.server.hub.unhandled.append(f"{method} {url.path}")
                raise HubError(404, f"Route not implemented by the local test Hub: {method} {url.path}")
            handler, args = route
            handler(self, *args)
        except HubError as err:
            self.send_error_answer(err)
        except Exception as err:  # a bug here: answer like a failing Hub and let the test see it
            logger.exception("Local test Hub failed on %s %s", method, url.path)
            self.server.hub.unhandled.append(f"{method} {url.path}: {err!r}")
            self.send_error_answer(HubError(500, f"Local test Hub error: {err!r}"))
        self.server.hub.requests.append((method, url.path, self._status))

    def send_error_answer(self, err: HubError) -> None:
        headers = {"X-Error-Message": err.message, **err.headers}
        if err.code:
            headers["X-Error-Code"] = err.code
        self.send_json({"error": err.message}, err.status, headers)

    def _read_body(self) -> bytes:
        """The request's body, by its Content-Length or its chunks; a 400 (and the connection closed after the
        answer: where the body ends is unknown) when a length or a chunk size is not a number of bytes."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := self._body_size(self.rfile.readline().split(b";")[0].strip().decode("latin-1"), "chunk size"):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                continue  # trailer lines
            return b"".join(chunks)
        return self.rfile.read(self._body_size(self.headers.get("Content-Length") or "0", "Content-Length"))

    def _body_size(self, text: str, what: str) -> int:
        """A Content-Length (decimal digits) or a chunk size (hexadecimal digits) as a number of bytes."""
        if not re.fullmatch(r"[0-9]+" if what == "Content-Length" else r"[0-9a-fA-F]+", text):
            self.close_connection = True
            raise HubError(400, f"The request's body cannot be read: {what} {text[:40]!r} is not a number of bytes")
        return int(text, 10 if what == "Content-Length" else 16)

    def send(self, status: int, body: bytes = b"", content_type: str = "application/json", headers=None):
        self._status = status
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, payload, status: int = 200, headers=None):
        self.send(status, json.dumps(payload).encode(), "application/json", headers)

    def json_body(self) -> dict:
        try:
            return json.loads(self.body or b"{}")
        except json.JSONDecodeError as err:
            raise HubError(400, f"Body is not JSON: {err}") from err

    @property
    def authorized(self) -> bool:
        return self.headers.get("Authorization", "").startswith("Bearer ")

    def require_token(self) -> None:
        if not self.authorized:
            raise HubError(401, "Invalid credentials in Authorization header")


class LocalHub:
    """The server: start() it, point clients at `url` (see `client_env`), stop() it."""

    def __init__(self, storage: Path | None = None):
        self._own_storage = storage is None
        self.storage = Path(storage) if storage else Path(tempfile.mkdtemp(prefix="fiber-local-hub-"))
        self.store = HubStore(self.storage)
        self.requests: list[tuple[str, str, int]] = []
        self.unhandled: list[str] = []
        # Path fragment -> the failure of requests whose path contains it (see `fail`).
        self.faults: dict[str, Fault] = {}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "LocalHub":
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), HubRequestHandler)
        self._server.daemon_threads = True
        self._server.hub = self
        # A short poll interval keeps stop() (which waits for one poll) fast in per-test fixtures.
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="local-hub", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join()
            self._server = None
        if self._own_storage:
            shutil.rmtree(self.storage, ignore_errors=True)

    def __enter__(self) -> "LocalHub":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def client_env(self, home: Path) -> dict[str, str]:
        """Environment for a client process: this endpoint, a token, no Xet, caches under `home`."""
        return {
            "HF_ENDPOINT": self.url,
            "HF_TOKEN": "hf_local_test_token",
            "HF_HUB_DISABLE_XET": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HOME": str(home),
            "HF_HUB_CACHE": str(home / "hub"),
            "HF_DATASETS_CACHE": str(home / "datasets"),
            "HF_MODULES_CACHE": str(home / "modules"),
        }

    def fail(self, path_part: str, status: int = 500, *, after: int = 0, times: int | None = None) -> None:
        """Make requests whose path contains `path_part` (e.g. "/commit/") fail with `status`.

        The first `after` such requests still succeed; then `times` of them fail (every one when None),
        and those that come later succeed again: a Hub that refuses one commit in the middle of a run.
        """
        self.faults[path_part] = Fault(status, after, times)

    def injected_failure(self, path: str) -> int | None:
        """The status a request for `path` must fail with (counting it against its fault), or None."""
        with self.store.lock:
            for part, fault in self.faults.items():
                if part in path:
                    fault.seen += 1
                    past = fault.seen - fault.after
                    if past > 0 and (fault.times is None or past <= fault.times):
                        return fault.status
        return None

    def history(self, repo_id: str, repo_type: str = "model") -> list[Commit]:
        """The commits of the repo's main branch, oldest first."""
        with self.store.lock:  # not while a commit is being added
            repo = self.store.repos[(repo_type, repo_id)]
            oid, found = repo.branches[DEFAULT_BRANCH], []
            while oid is not None:
                found.append(repo.commits[oid])
                oid = repo.commits[oid].parent
        return found[::-1]

    def repo_url(self, repo_type: str, repo_id: str) -> str:
        prefix = "" if repo_type == "model" else f"{repo_type}s/"
        return f"{self.url}/{prefix}{repo_id}"

    # Routing

    def route(self, method: str, segments: list[str]) -> tuple | None:
        """The handler for a request path split into unquoted segments, or None."""
        if segments[:1] == ["api"]:
            return self._route_api(method, segments[1:])
        if method == "PUT" and len(segments) == 2 and segments[0] == "lfs-upload":
            return handle_lfs_put, (segments[1],)
        repo_type = "model"
        if segments and segments[0] in ("datasets", "spaces"):
            repo_type, segments = segments[0][:-1], segments[1:]
        if len(segments) >= 4 and segments[2] == "resolve" and method in ("GET", "HEAD"):
            return handle_resolve, (repo_type, "/".join(segments[:2]), segments[3], "/".join(segments[4:]))
        lfs_batch = ["info", "lfs", "objects", "batch"]
        if method == "POST" and segments[2:] == lfs_batch and segments[1].endswith(".git"):
            return handle_lfs_batch, (repo_type, f"{segments[0]}/{segments[1][:-4]}")
        return None

    def _route_api(self, method: str, segments: list[str]) -> tuple | None:
        if method == "GET" and segments == ["whoami-v2"]:
            return handle_whoami, ()
        if method == "GET" and segments == ["agent-harnesses"]:
            return handle_agent_harnesses, ()
        if method == "POST" and segments == ["repos", "create"]:
            return handle_create_repo, ()
        if method in ("POST", "DELETE") and segments == ["repos", "delete"]:
            return handle_delete_repo, ()
        if method == "POST" and segments == ["validate-yaml"]:
            return handle_validate_yaml, ()
        if len(segments) < 3 or segments[0] not in ("models", "datasets", "spaces"):
            return None
        repo_type, repo_id, action = segments[0][:-1], "/".join(segments[1:3]), segments[3:]
        if method == "GET" and action == []:
            return handle_repo_info, (repo_type, repo_id, DEFAULT_BRANCH)
        if method == "GET" and len(action) == 2 and action[0] == "revision":
            return handle_repo_info, (repo_type, repo_id, action[1])
        if method == "GET" and action == ["refs"]:
            return handle_refs, (repo_type, repo_id)
        if method == "GET" and len(action) >= 2 and action[0] == "tree":
            return handle_tree, (repo_type, repo_id, action[1], "/".join(action[2:]))
        endpoints = {"paths-info": handle_paths_info, "preupload": handle_preupload, "commit": handle_commit}
        if method == "POST" and len(action) == 2 and action[0] in endpoints:
            return endpoints[action[0]], (repo_type, repo_id, action[1])
        return None


# Handlers: each takes the request and the arguments its route took from the path.


def handle_whoami(request: HubRequestHandler) -> None:
    request.require_token()
    request.send_json(
        {
            "type": "user",
            "id": "0" * 24,
            "name": USER,
            "fullname": "FIBER test user",
            "email": None,
            "orgs": [],
            "auth": {"type": "access_token", "accessToken": {"displayName": "local-test", "role": "write"}},
        }
    )


def handle_agent_harnesses(request: HubRequestHandler) -> None:
    """The registry huggingface_hub fetches once a day to name the AI agent in its user agent: empty."""
    request.send_json({"standardEnvVars": [], "harnesses": {}})


def handle_create_repo(request: HubRequestHandler) -> None:
    request.require_token()
    payload = request.json_body()
    repo_type = payload.get("type") or "model"
    if repo_type not in REPO_TYPES:
        raise HubError(400, f"Invalid repo type {repo_type!r}")
    if repo_type == "space" and not payload.get("sdk"):
        raise HubError(400, "A Space needs an sdk")
    repo_id = f"{payload.get('organization') or USER}/{payload['name']}"
    private = payload.get("visibility", "private" if payload.get("private") else "public") != "public"
    hub = request.server.hub
    try:
        hub.store.create_repo(repo_type, repo_id, private, payload.get("sdk"))
    except HubError as err:  # the Hub's 409 names the existing repo, which create_repo(exist_ok=True) accepts
        request.send_json({"error": err.message, "url": hub.repo_url(repo_type, repo_id)}, status=err.status)
        return
    request.send_json({"url": hub.repo_url(repo_type, repo_id), "name": repo_id, "id": repo_id})


def handle_delete_repo(request: HubRequestHandler) -> None:
    request.require_token()
    payload = request.json_body()
    repo_type = payload.get("type") or "model"
    repo_id = f"{payload.get('organization') or USER}/{payload['name']}"
    store = request.server.hub.store
    with store.lock:
        if store.repos.pop((repo_type, repo_id), None) is None:
            raise repo_not_found(repo_type, repo_id)
    request.send_json({})


def handle_validate_yaml(request: HubRequestHandler) -> None:
    """Front matter must be closed; its YAML is not parsed (no YAML parser in the standard library)."""
    content = request.json_body().get("content", "")
    lines = content.splitlines()
    if lines[:1] == ["---"] and "---" not in lines[1:]:
        request.send_json({"errors": [{"message": "README.md front matter is not closed by ---"}]}, status=400)
        return
    request.send_json({"errors": [], "warnings": []})


def find_commit(request: HubRequestHandler, repo_type: str, repo_id: str, revision: str) -> tuple[Repo, Commit]:
    repo = request.server.hub.store.repo(repo_type, repo_id, request.authorized)
    commit = repo.resolve(revision)
    if commit is None:
        raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
    return repo, commit


def handle_repo_info(request: HubRequestHandler, repo_type: str, repo_id: str, revision: str) -> None:
    repo, commit = find_commit(request, repo_type, repo_id, revision)
    info = {
        "_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24],
        "id": repo_id,
        "author": repo_id.split("/")[0],
        "sha": commit.oid,
        "private": repo.private,
        "gated": False,
        "disabled": False,
        "createdAt": repo.created_at,
        "lastModified": commit.date,
        "tags": [],
        "downloads": 0,
        "likes": 0,
        "siblings": [{"rfilename": path} for path in sorted(commit.files)],
    }
    if repo_type == "space":
        info["sdk"] = repo.sdk
    request.send_json(info)


def handle_refs(request: HubRequestHandler, repo_type: str, repo_id: str) -> None:
    repo = request.server.hub.store.repo(repo_type, repo_id, request.authorized)
    branches = [
        {"name": name, "ref": f"refs/heads/{name}", "targetCommit": oid} for name, oid in repo.branches.items()
    ]
    request.send_json({"branches": branches, "converts": [], "tags": [], "pullRequests": []})


def tree_entry(store: HubStore, path: str, stored: StoredFile) -> dict:
    content = None if stored.lfs else store.read_blob(stored.sha256)
    entry = {"type": "file", "oid": stored.git_oid(content), "size": stored.size, "path": path}
    if stored.lfs:
        entry["lfs"] = {"oid": stored.sha256, "size": stored.size, "pointerSize": len(stored.pointer)}
    return entry


def folder_entry(commit: Commit, folder: str) -> dict:
    """A folder's entry; its oid is a stable digest of what it holds (the Hub's is a git tree id)."""
    digest = hashlib.sha1(folder.encode())
    for path in sorted(path for path in commit.files if path.startswith(folder + "/")):
        digest.update(f"{path}\0{commit.files[path].sha256}".encode())
    return {"type": "directory", "oid": digest.hexdigest(), "path": folder}


def handle_tree(request: HubRequestHandler, repo_type: str, repo_id: str, revision: str, folder: str) -> None:
    _, commit = find_commit(request, repo_type, repo_id, revision)
    store = request.server.hub.store
    recursive = request.query.get("recursive", ["false"])[0].lower() in ("1", "true")
    prefix = f"{folder.strip('/')}/" if folder.strip("/") else ""
    files = [path for path in commit.files if path.startswith(prefix)]
    if prefix and not files:
        raise HubError(404, f"Entry not found: {folder}", "EntryNotFound", {"X-Repo-Commit": commit.oid})
    folders = {name for name in folders_of(files) if name.startswith(prefix)}
    if not recursive:
        depth = prefix.count("/") + 1
        files = [path for path in files if path.count("/") < depth]
        folders = {name for name in folders if name.count("/") < depth}
    entries = [folder_entry(commit, name) for name in sorted(folders)]
    entries += [tree_entry(store, path, commit.files[path]) for path in sorted(files)]
    request.send_json(entries)


def handle_paths_info(request: HubRequestHandler, repo_type: str, repo_id: str, revision: str) -> None:
    _, commit = find_commit(request, repo_type, repo_id, revision)
    store = request.server.hub.store
    form = parse_qs(request.body.decode())
    folders = folders_of(commit.files)
    entries = []
    for path in form.get("paths", []):
        path = path.strip("/")
        if path in commit.files:
            entries.append(tree_entry(store, path, commit.files[path]))
        elif path in folders:
            entries.append(folder_entry(commit, path))
    request.send_json(entries)


def is_lfs(path: str, size: int, sample: bytes) -> bool:
    return size >= LFS_MIN_SIZE or path.endswith(LFS_SUFFIXES) or b"\0" in sample


def handle_preupload(request: HubRequestHandler, repo_type: str, repo_id: str, revision: str) -> None:
    request.require_token()
    _, commit = find_commit(request, repo_type, repo_id, revision)
    store = request.server.hub.store
    files = []
    for item in request.json_body().get("files", []):
        path, size = item["path"], item["size"]
        mode = "lfs" if size and is_lfs(path, size, base64.b64decode(item.get("sample", ""))) else "regular"
        remote = commit.files.get(path)
        # The client skips a file whose oid it computes the same: sha256 for LFS, git blob id otherwise.
        oid = None
        if remote is not None:
            oid = remote.sha256 if remote.lfs else remote.git_oid(store.read_blob(remote.sha256))
        files.append({"path": path, "uploadMode": mode, "shouldIgnore": False, "oid": oid})
    request.send_json({"files": files, "commitOid": commit.oid})


def handle_commit(request: HubRequestHandler, repo_type: str, repo_id: str, branch: str) -> None:
    request.require_token()
    if request.query.get("create_pr"):
        raise HubError(400, "Pull requests are not supported by the local test Hub")
    hub = request.server.hub
    repo = hub.store.repo(repo_type, repo_id, authorized=True)
    try:
        lines = [json.loads(line) for line in request.body.splitlines() if line.strip()]
    except json.JSONDecodeError as err:
        raise HubError(400, f"Commit body is not NDJSON: {err}") from err
    if not lines or lines[0].get("key") != "header":
        raise HubError(400, "A commit starts with a header line")
    commit = hub.store.commit(repo, branch, lines[1:], lines[0]["value"])
    request.send_json(
        {
            "success": True,
            "commitOid": commit.oid,
            "commitUrl": f"{hub.repo_url(repo_type, repo_id)}/commit/{commit.oid}",
            "pullRequestUrl": None,
        }
    )


def handle_lfs_batch(request: HubRequestHandler, repo_type: str, repo_id: str) -> None:
    """The git-lfs batch API: where to PUT each object (nothing for objects already stored)."""
    request.require_token()
    hub = request.server.hub
    hub.store.repo(repo_type, repo_id, authorized=True)
    payload = request.json_body()
    if payload.get("operation") != "upload":
        raise HubError(400, "Only the upload operation of the LFS batch API is supported")
    objects = []
    for item in payload.get("objects", []):
        entry = {"oid": check_lfs_oid(item.get("oid")), "size": item["size"], "authenticated": True}
        if not hub.store.has_blob(item["oid"]):
            entry["actions"] = {"upload": {"href": f"{hub.url}/lfs-upload/{item['oid']}", "header": {}}}
        objects.append(entry)
    request.send(
        200, json.dumps({"transfer": "basic", "objects": objects}).encode(), "application/vnd.git-lfs+json"
    )


def handle_lfs_put(request: HubRequestHandler, sha256: str) -> None:
    """Store an uploaded LFS object (the Hub's presigned storage URL), checking its sha256."""
    store = request.server.hub.store
    check_lfs_oid(sha256)
    actual = hashlib.sha256(request.body).hexdigest()
    if actual != sha256:
        raise HubError(400, f"Uploaded content has sha256 {actual}, expected {sha256}")
    store.put_blob(request.body)
    request.send(200, b"", "text/plain")


RANGE = re.compile(r"bytes=(\d*)-(\d*)")


def byte_range(header: str, size: int) -> tuple[int, int]:
    """First and last byte (inclusive) of a single-range `Range` header, clipped to `size` bytes."""
    match = RANGE.fullmatch(header.strip())
    if match is None or match.groups() == ("", ""):
        raise HubError(400, f"Unsupported Range header {header!r}")
    first, last = match.groups()
    if first == "":  # "bytes=-N": the last N bytes
        return max(size - int(last), 0), size - 1
    return int(first), min(int(last or size - 1), size - 1)


def handle_resolve(request: HubRequestHandler, repo_type: str, repo_id: str, revision: str, path: str) -> None:
    """A file's bytes (or a Range of them) with the headers hf_hub_download checks."""
    _, commit = find_commit(request, repo_type, repo_id, revision)
    stored = commit.files.get(path)
    if stored is None:
        raise HubError(404, f"Entry not found: {path}", "EntryNotFound", {"X-Repo-Commit": commit.oid})
    content = request.server.hub.store.read_blob(stored.sha256)
    headers = {"X-Repo-Commit": commit.oid, "Accept-Ranges": "bytes", "ETag": f'"{stored.git_oid(content)}"'}
    if stored.lfs:
        headers.update({"X-Linked-Size": str(stored.size), "X-Linked-Etag": f'"{stored.sha256}"'})
    range_header = request.headers.get("Range")
    if range_header is None:
        request.send(200, content, "application/octet-stream", headers)
        return
    start, end = byte_range(range_header, len(content))
    if start > end:
        headers["Content-Range"] = f"bytes */{len(content)}"
        raise HubError(416, f"Range {range_header} not satisfiable for {len(content)} bytes", headers=headers)
    headers["Content-Range"] = f"bytes {start}-{end}/{len(content)}"
    request.send(206, content[start : end + 1], "application/octet-stream", headers)


def serve_until_stopped() -> None:
    """Serve until Ctrl-C, SIGINT or SIGTERM, then remove the storage (uploads can be large)."""

    def stop(signal_number, frame):
        raise SystemExit(128 + signal_number)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with LocalHub() as hub:
        print(" ".join(f"{name}={value}" for name, value in hub.client_env(hub.storage / "client").items()))
        print(f"Serving until Ctrl-C or SIGTERM; storage {hub.storage} is removed then", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    # By hand: `python tests/hub/hub_server.py`, then run clients with the printed environment.
    serve_until_stopped()
