"""Messages of the client library as the runtime's generated classes.

:mod:`maka_client` carries its own generated code (``maka_client._gen``: the library ships alone), while
the surfaces decode with the runtime's (``gen/``, the ``maka`` package). Both register the same
descriptors in protobuf's default pool, so at run time a message of one is the same class as the other's
and :func:`same` returns it as it is; the type checker sees two classes, and a protobuf runtime that kept
them apart would get a copy.
"""

from __future__ import annotations

from typing import TypeVar

from google.protobuf.message import Message

M = TypeVar("M", bound=Message)


def same(cls: type[M], message: Message) -> M:
    """``message`` as ``cls`` (the same message type from the other generated package)."""
    return message if isinstance(message, cls) else cls.FromString(message.SerializeToString())
