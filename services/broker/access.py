"""Who may see and who may act on a call (docs/security.md "Who may see and do what"): the one rule every broker
RPC that names a call, a session or a turn applies (``GetStatus``, ``Stop``, ``WatchCall``).

- :func:`made_for`: the person a principal's call is made for (its forms reach only that person and the approvers
  a policy names, docs/security.md "Who sees a form").
- :func:`sees_call`: a session the principal may see and, for a person, a call made for them or for no person
  (a machine caller's: listed, Tool and state only), never another person's.
- :func:`may_act_on`: what :func:`sees_call` allows, narrowed for a person to the calls made for them (the same
  name; the same issuer when both name one). A token that is not a person (the ``admin`` token included) acts on
  every call of its sessions; a person acts only on their own, whatever roles they hold (a service acting for
  them with an ``admin`` token, as ``maka up``'s web page does, lends them no one else's calls). What a
  principal may not act on is answered as if it did not exist (``Stop`` counts 0, ``WatchCall`` is
  ``CALL_NOT_FOUND``), so ids and sessions reveal nothing.
"""

from __future__ import annotations

from maka.interaction.v1 import interaction_pb2
from services.broker.invocation import Invocation
from services.core.auth import Principal


def made_for(principal: Principal) -> interaction_pb2.Person | None:
    """The person a call of ``principal`` is made for (docs/security.md "Who sees a form"): the person a caller
    allowed to act for people named (``x-maka-acts-for``; ``via`` that caller), or the caller itself when its own
    OpenID Connect token was verified (``issuer``); None for a machine token or no authentication."""
    if not principal.person:
        return None
    return interaction_pb2.Person(principal=principal.name, issuer=principal.issuer, via=principal.via)


def _made_for_them(principal: Principal, made: interaction_pb2.Person) -> bool:
    if principal.name != made.principal:
        return False
    return not (principal.issuer and made.issuer and principal.issuer != made.issuer)


def sees_call(principal: Principal, invocation: Invocation) -> bool:
    """Whether ``principal`` sees ``invocation`` in an activity list (``GetStatus``): a session it may see and, for
    a person (their own token, or named by a service acting for them, as the web page does), a call made for no
    person or for them, never another person's."""
    if not principal.may_see(invocation.session_id):
        return False
    made = invocation.made_for
    if not principal.person or made is None or not made.principal:
        return True
    return _made_for_them(principal, made)


def may_act_on(principal: Principal, invocation: Invocation) -> bool:
    """Whether ``principal`` may stop or reattach to ``invocation``: it sees the call (:func:`sees_call`) and, for a
    person (whatever their roles), the call was made for them (not a machine caller's, not another person's)."""
    if not sees_call(principal, invocation):
        return False
    if not principal.person:
        return True
    made = invocation.made_for
    return made is not None and bool(made.principal) and _made_for_them(principal, made)
