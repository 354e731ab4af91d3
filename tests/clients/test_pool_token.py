"""The composite resume token of a surface following a pool (``maka_client.surface.encode_pool_token``): one opaque,
bounded token carrying each Host's own Attach token (docs/design.md#surfaces-follow-the-pool)."""

from __future__ import annotations

import base64

from maka_client.surface import MAX_POOL_HOSTS, MAX_POOL_TOKEN_CHARS, decode_pool_token, encode_pool_token


def test_a_pool_token_carries_each_hosts_own_token_back() -> None:
    tokens = {"team-a-host-0": "eyJ2IjoxfQ", "team-a-host-1": "eyJ2IjoyfQ"}
    token = encode_pool_token(tokens)
    assert "team-a-host" not in token, "opaque: no Host id in clear"
    assert decode_pool_token(token) == tokens


def test_a_pool_token_too_long_leaves_out_the_longest_hosts_which_then_start_with_a_snapshot() -> None:
    tokens = {"small": "a" * 10, "huge": "b" * MAX_POOL_TOKEN_CHARS, "medium": "c" * 100}
    token = encode_pool_token(tokens)
    assert len(token) <= MAX_POOL_TOKEN_CHARS
    assert decode_pool_token(token) == {"small": "a" * 10, "medium": "c" * 100}


def test_anything_but_a_pool_token_resumes_no_host() -> None:
    single_host_token = base64.urlsafe_b64encode(b'{"v":1,"t":1,"p":{"*":"0-0"}}').decode().rstrip("=")
    assert decode_pool_token(single_host_token) == {}
    assert decode_pool_token("pool1.not base64 !") == {}
    assert decode_pool_token("pool1." + base64.urlsafe_b64encode(b'["a", "b"]').decode()) == {}
    assert decode_pool_token("pool1." + base64.urlsafe_b64encode(b'{"h": 3}').decode()) == {}
    assert decode_pool_token("pool1." + "A" * MAX_POOL_TOKEN_CHARS) == {}


def test_a_pool_token_names_at_most_the_pool_cap_of_hosts() -> None:
    tokens = {f"h{i:03d}": "t" for i in range(MAX_POOL_HOSTS + 10)}
    assert len(decode_pool_token(encode_pool_token(tokens))) == MAX_POOL_HOSTS
