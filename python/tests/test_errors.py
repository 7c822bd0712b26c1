"""The typed errors mirror the wire's error codes (env/protocol/messages.cc) one to one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelgym import errors

REPO = Path(__file__).resolve().parents[2]


def cpp_error_codes() -> list[str]:
    """The code names in the C++ table (ErrorCode -> wire name), in its order."""
    source = (REPO / "env" / "protocol" / "messages.cc").read_text()
    names = re.findall(r'\{ErrorCode::k\w+,\s*"([A-Z_]+)"\}', source)
    assert names, "no error codes found in env/protocol/messages.cc: did its table change shape?"
    return names


def cpp_enum_size() -> int:
    header = (REPO / "env" / "protocol" / "messages.h").read_text()
    body = re.search(r"enum class ErrorCode \{(.*?)\};", header, re.DOTALL)
    assert body, "no `enum class ErrorCode` in env/protocol/messages.h"
    return len(re.findall(r"^\s*k\w+,", body.group(1), re.MULTILINE))


def test_python_codes_are_the_cpp_codes_in_order():
    assert list(errors.ERROR_CODES) == cpp_error_codes()
    assert len(errors.ERROR_CODES) == cpp_enum_size()


@pytest.mark.parametrize("code", cpp_error_codes())
def test_each_code_has_its_own_class_named_after_it(code):
    cls = errors.ERRORS_BY_CODE[code]
    assert cls.__name__ == "".join(part.capitalize() for part in code.split("_"))
    assert issubclass(cls, errors.ServerError) and cls is not errors.ServerError
    assert cls.code == code
    e = errors.server_error(code, "what happened", {"op": "env.step"}, op="env.step")
    assert type(e) is cls
    assert isinstance(e, errors.KernelGymError)
    assert (e.code, e.message, e.details, e.op) == (code, "what happened", {"op": "env.step"}, "env.step")
    assert str(e) == f"env.step: {code}: what happened"


def test_overloaded_says_when_to_retry():
    assert errors.server_error("OVERLOADED", "queue full", {"retry_after_s": "0.5"}).retry_after_s == 0.5
    assert errors.server_error("OVERLOADED", "queue full", {}).retry_after_s is None
    assert errors.server_error("OVERLOADED", "queue full", {"retry_after_s": "soon"}).retry_after_s is None


def test_the_kinds_of_failure_are_separate():
    for cls in (errors.ServerError, errors.TransportError, errors.ProtocolError):
        assert issubclass(cls, errors.KernelGymError)
    assert not issubclass(errors.TransportError, errors.ServerError)
    assert not issubclass(errors.ProtocolError, errors.ServerError)
    assert errors.ProtocolError("bad", id=7).id == 7
    assert errors.ProtocolError("bad").id == 0
