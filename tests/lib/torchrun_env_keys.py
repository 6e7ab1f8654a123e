# The environment keys torchrun gives each worker, read from the installed PyTorch's source
# with `ast` (PyTorch is not imported), so tests/it_torch_env.sh follows whatever version is
# installed rather than a list copied from one.
#
# Where torchrun builds a worker's environment:
#  - LocalElasticAgent._start_workers (torch/distributed/elastic/agent/server/
#    local_elastic_agent.py): a dict literal holding "RANK", then `worker_env["X"] = ...`
#    assignments; and the methods it calls on self/super() (e.g. _setup_local_watchdog, which
#    adds worker_env[TORCHELASTIC_TIMER_FILE]), looked up there and in api.py.
#  - torch/distributed/elastic/multiprocessing/*.py: `envs[local_rank]["X"] = ...` (the
#    per-worker TORCHELASTIC_ERROR_FILE).
# A key given by a name (worker_env[NAME]) is resolved through the function's and the module's
# string assignments. A key assigned inside an `if` is marked conditional; a dict value of the
# form os.getenv("X", D) / os.environ.get("X", D) records D as torchrun's default.
#
# Usage: python3 torchrun_env_keys.py [TORCH_DIR]  ->  JSON on stdout:
#   {"version": "...", "keys": {KEY: {"where": "...", "conditional": bool, "default": str|null}},
#    "role_default": "default"|null}
# Exits 1 with a message on stderr when a file is missing or no key was found.
import ast
import glob
import importlib.util
import json
import os
import sys


def torch_dir():
    if len(sys.argv) > 1:
        return sys.argv[1]
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torch is not installed for " + sys.executable)
    return list(spec.submodule_search_locations)[0]


def parse(path):
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), path)


def module_strings(tree):
    """NAME = "STR" at module level."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node.value.value
    return out


def local_names(func, consts):
    """NAME = "STR" or NAME = OTHER_NAME (a module string) inside func."""
    out = dict(consts)
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            v = node.value
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                out[node.targets[0].id] = v.value
            elif isinstance(v, ast.Name) and v.id in out:
                out[node.targets[0].id] = out[v.id]
    return out


def key_of(slice_node, names):
    s = slice_node.value if sys.version_info < (3, 9) else slice_node  # ast.Index before 3.9
    if isinstance(s, ast.Constant) and isinstance(s.value, str):
        return s.value
    if isinstance(s, ast.Name):
        return names.get(s.id)
    return None


def getenv_default(v):
    """D of os.getenv("X", D) / os.environ.get("X", D), as a string; None otherwise."""
    if not isinstance(v, ast.Call) or len(v.args) != 2:
        return None
    f = ast.unparse(v.func)
    if f not in ("os.getenv", "os.environ.get"):
        return None
    d = v.args[1]
    if isinstance(d, ast.Call) and ast.unparse(d.func) == "str" and len(d.args) == 1:
        d = d.args[0]
    try:
        return str(ast.literal_eval(d))
    except ValueError:
        return None


def inside_if(func):
    """ids of the nodes under an `if` in func."""
    under = set()
    for node in ast.walk(func):
        if isinstance(node, ast.If):
            for sub in node.body + node.orelse:
                for n in ast.walk(sub):
                    under.add(id(n))
    return under


def env_subscripts(func, names, env_vars):
    """(key, node) for `V[KEY] = ...` with V a Name in env_vars, or V[...][KEY] with V in env_vars."""
    for node in ast.walk(func):
        if not isinstance(node, ast.Assign):
            continue
        for t in node.targets:
            if not isinstance(t, ast.Subscript):
                continue
            base = t.value
            if isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Name) and base.id in env_vars:
                k = key_of(t.slice, names)
                if k:
                    yield k, node


def main():
    tdir = torch_dir()
    server = os.path.join(tdir, "distributed", "elastic", "agent", "server")
    local_py, api_py = os.path.join(server, "local_elastic_agent.py"), os.path.join(server, "api.py")
    local_tree, api_tree = parse(local_py), parse(api_py)
    methods = {}
    for tree in (api_tree, local_tree):            # local's override api's
        consts = module_strings(tree)
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            for f in cls.body:
                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    methods[f.name] = (f, consts)
    if "_start_workers" not in methods:
        sys.exit(f"{local_py}: no _start_workers")
    keys = {}

    def add(k, where, conditional, default=None):
        if k not in keys:
            keys[k] = {"where": where, "conditional": conditional, "default": default}

    start, consts = methods["_start_workers"]
    names = local_names(start, consts)
    under_if = inside_if(start)
    env_vars = {"worker_env", "env", "env_", "envs"}
    for node in ast.walk(start):                   # the dict literal that holds "RANK"
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict):
            dkeys = [key_of(k, names) if k is not None else None for k in node.value.keys]
            if "RANK" not in dkeys:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            env_vars |= {t.id for t in targets if isinstance(t, ast.Name)}
            for k, v in zip(dkeys, node.value.values):
                if k:
                    add(k, "_start_workers dict", id(node) in under_if, getenv_default(v))
    for k, node in env_subscripts(start, names, env_vars):
        add(k, "_start_workers", id(node) in under_if)
    # Methods _start_workers calls on self / super(): they may add to the workers' envs.
    for node in ast.walk(start):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in methods and node.func.attr != "_start_workers":
            f, fconsts = methods[node.func.attr]
            fnames, fif = local_names(f, fconsts), inside_if(f)
            for k, n in env_subscripts(f, fnames, {"worker_env", "env", "env_", "envs"}):
                add(k, f.name, id(n) in fif or id(node) in under_if)
    # start_processes and its helpers: envs[local_rank]["X"] = ...
    mp = os.path.join(tdir, "distributed", "elastic", "multiprocessing")
    for path in sorted(glob.glob(os.path.join(mp, "*.py"))):
        tree = parse(path)
        consts = module_strings(tree)
        for f in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            fnames, fif = local_names(f, consts), inside_if(f)
            for k, n in env_subscripts(f, fnames, {"envs"}):
                add(k, f"multiprocessing/{os.path.basename(path)}:{f.name}", id(n) in fif)
    if not keys or "RANK" not in keys or "WORLD_SIZE" not in keys:
        sys.exit(f"{local_py}: found no worker environment (keys: {sorted(keys)})")
    role = None
    run_py = os.path.join(tdir, "distributed", "run.py")
    for node in ast.walk(parse(run_py)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument" \
                and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "--role":
            for kw in node.keywords:
                if kw.arg == "default" and isinstance(kw.value, ast.Constant):
                    role = kw.value.value
    version = None
    try:
        version = module_strings(parse(os.path.join(tdir, "version.py"))).get("__version__")
    except OSError:
        pass
    json.dump({"version": version, "dir": tdir, "keys": keys, "role_default": role}, sys.stdout, indent=1)
    print()


main()
