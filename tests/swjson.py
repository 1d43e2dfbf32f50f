"""Reading stallwatch's --json output: every command prints one envelope (json_format_version,
stallwatch_version, command) around its payload. loads() checks the envelope and gives the
payload the tests look at: the list of jobs, incidents or drives, else the object itself."""
import json

FORMAT_MAJOR = 1


def loads(text):
    out = json.loads(text)
    if not isinstance(out, dict) or "json_format_version" not in out:
        raise AssertionError(f"not a stallwatch --json envelope: {str(out)[:200]}")
    if out["json_format_version"][0] != FORMAT_MAJOR:
        raise AssertionError(f"json_format_version {out['json_format_version']}, expected {FORMAT_MAJOR}.x")
    for key in ("jobs", "incidents", "drives"):
        if key in out:
            return out[key]
    return out
