"""Imports the reference's `smdebug` package (awslabs/sagemaker-debugger)
for the legacy debug-folder comparison, or says why it cannot.

The package is taken from the mirror named by TW_REF_MIRROR (a bare git
directory, ../shared/reference/README.md) with `git archive`, into
/tmp/tw_smdebug_debug_<commit>, and its protobuf modules are generated
there with protoc. Modules it imports but never uses offline (boto3,
botocore, pyinstrument) are replaced by inert stand-ins.
"""
import os
import shutil
import subprocess
import sys
import types

COMMIT = "3b82de31"  # DEBUG_RULES.md 10: the hook and reader it describes


def unavailable():
    """None when the reference can be imported, else the reason."""
    mirror = os.environ.get("TW_REF_MIRROR")
    if not mirror or not os.path.isdir(mirror):
        return "TW_REF_MIRROR is not set to the reference's git directory"
    if shutil.which("protoc") is None:
        return "protoc is missing (apt-get install protobuf-compiler)"
    try:
        import google.protobuf  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        return f"{e.name} is missing (python3-protobuf, torch)"
    return None


def _stub(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    parent, _, child = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], child, m)


def _offline(*_a, **_k):
    raise RuntimeError("not available offline")


class _Err(Exception):
    pass


def import_reference():
    """Makes `import smdebug` give the reference's package."""
    why = unavailable()
    if why:
        raise SystemExit(f"reference unavailable: {why}")
    mirror = os.environ["TW_REF_MIRROR"]
    dest = f"/tmp/tw_smdebug_debug_{COMMIT}"
    if not os.path.exists(os.path.join(dest, ".done")):
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(dest)
        archive = subprocess.run(
            ["git", "-C", mirror, "archive", COMMIT, "smdebug"],
            check=True, capture_output=True).stdout
        subprocess.run(["tar", "x", "-C", dest], input=archive, check=True)
        protos = os.path.join("smdebug", "core", "tfevent", "proto")
        files = sorted(f for f in os.listdir(os.path.join(dest, protos))
                       if f.endswith(".proto"))
        subprocess.run(["protoc", "--python_out=."]
                       + [os.path.join(protos, f) for f in files],
                       cwd=dest, check=True)
        open(os.path.join(dest, ".done"), "w").close()
    _stub("botocore")
    _stub("botocore.exceptions", ClientError=_Err,
          CredentialRetrievalError=_Err, NoCredentialsError=_Err,
          NoRegionError=_Err, PartialCredentialsError=_Err,
          ServiceNotInRegionError=_Err, UnknownSignatureVersionError=_Err)
    _stub("boto3", client=_offline, resource=_offline, Session=_offline)
    _stub("boto3.s3")
    _stub("boto3.s3.transfer", TransferConfig=_offline)
    _stub("pyinstrument", Profiler=_offline)
    _stub("pyinstrument.renderers", JSONRenderer=_offline)
    os.environ.setdefault("SMDEBUG_LOG_LEVEL", "error")
    sys.path.insert(0, dest)
