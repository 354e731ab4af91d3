"""Approver policies (docs/security.md "Who sees a form"): the matcher, the file's shape, and its reload on change."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from maka.interaction.v1 import interaction_pb2
from services.core.auth import Principal, Role
from services.interaction.policy import Policies, PolicyFile, PolicyFileError, made_for_person, visible

ISSUER = "https://id.example.com"
ALICE = interaction_pb2.Person(principal="alice@example.com", issuer=ISSUER)
RELEASE = {"policies": [{"server": "prod-*", "tool": "deploy", "approvers": {"groups": ["release-managers"]}}]}


def person(name: str, *groups: str, issuer: str = ISSUER, via: str = "") -> Principal:
    return Principal(
        name=name, roles=frozenset({Role.SURFACE}), issuer=issuer if not via else "", via=via, groups=frozenset(groups)
    )


def machine(name: str = "tui") -> Principal:
    return Principal(name=name, roles=frozenset({Role.SURFACE}))


def write(path: Path, data: object) -> Path:
    """Write ``data`` as a new file replacing ``path`` (a new inode, as editors and Kubernetes volumes do)."""
    staged = path.with_suffix(".new")
    staged.write_text(json.dumps(data))
    os.replace(staged, path)
    return path


def test_a_policy_names_approvers_of_the_tools_its_server_and_tool_globs_match() -> None:
    policies = Policies.parse(json.dumps(RELEASE))
    bob = person("bob@example.com", "release-managers")
    assert policies.approves(bob, "prod-deploy:deploy")
    assert policies.approves(bob, "prod-eu:deploy")
    assert not policies.approves(bob, "staging:deploy")
    assert not policies.approves(bob, "prod-deploy:rollback")
    assert not policies.approves(person("carol@example.com", "developers"), "prod-deploy:deploy")


def test_a_policy_may_name_approvers_by_principal_and_defaults_to_every_server_and_tool() -> None:
    policies = Policies.parse(json.dumps({"policies": [{"approvers": {"principals": ["oncall@example.com"]}}]}))
    assert policies.approves(person("oncall@example.com"), "anything:at-all")
    assert not policies.approves(person("carol@example.com"), "anything:at-all")


def test_globs_are_case_sensitive_and_a_tool_name_without_a_server_matches_only_star_servers() -> None:
    policies = Policies.parse(json.dumps(RELEASE))
    bob = person("bob@example.com", "release-managers")
    assert not policies.approves(bob, "Prod-deploy:deploy")
    assert not policies.approves(bob, "deploy")


def test_a_form_without_a_person_is_visible_to_anyone_its_session_rule_admits() -> None:
    nobody = interaction_pb2.Person()
    assert visible(machine(), nobody, "prod-deploy:deploy", Policies())
    assert visible(person("carol@example.com"), nobody, "prod-deploy:deploy", Policies())


def test_a_person_s_form_is_visible_to_that_person_and_the_approvers_only_never_to_a_machine() -> None:
    policies = Policies.parse(json.dumps(RELEASE))
    assert visible(person("alice@example.com"), ALICE, "prod-deploy:deploy", policies)
    assert visible(person("alice@example.com", via="web"), ALICE, "prod-deploy:deploy", policies)
    assert visible(person("bob@example.com", "release-managers", via="web"), ALICE, "prod-deploy:deploy", policies)
    assert not visible(person("bob@example.com", "release-managers"), ALICE, "staging:deploy", policies)
    assert not visible(person("carol@example.com"), ALICE, "prod-deploy:deploy", policies)
    assert not visible(machine("alice@example.com"), ALICE, "prod-deploy:deploy", policies)
    admin = Principal(name="ops", roles=frozenset({Role.ADMIN}))
    assert not visible(admin, ALICE, "prod-deploy:deploy", policies)


def test_the_same_name_from_another_issuer_is_not_the_person() -> None:
    assert made_for_person(person("alice@example.com"), ALICE)
    assert not made_for_person(person("alice@example.com", issuer="https://other.example.com"), ALICE)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ([], '{"policies": [...]}'),
        ({"policies": [{"server": "", "approvers": {}}]}, "policies[0]: 'server' and 'tool'"),
        ({"policies": [{"approvers": {"groups": "release-managers"}}]}, "policies[0].approvers.groups"),
        ({"policies": [{"approvers": {"teams": ["x"]}}]}, "policies[0]: 'approvers'"),
        ({"policies": [{"approvers": {"principals": [""]}}]}, "policies[0].approvers.principals"),
    ],
)
def test_a_malformed_policy_file_is_refused_naming_the_entry(data: object, says: str) -> None:
    with pytest.raises(PolicyFileError) as refused:
        Policies.parse(json.dumps(data))
    assert says in str(refused.value)


def test_a_missing_or_malformed_file_is_an_error_at_start(tmp_path: Path) -> None:
    with pytest.raises(PolicyFileError):
        PolicyFile(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(PolicyFileError):
        PolicyFile(tmp_path / "bad.json")


def test_without_a_file_no_policy_approves_anyone() -> None:
    assert PolicyFile(None).current() == Policies()


def test_a_changed_file_is_read_again_on_use(tmp_path: Path) -> None:
    path = write(tmp_path / "policies.json", RELEASE)
    policies = PolicyFile(path)
    bob = person("bob@example.com", "release-managers")
    assert policies.current().approves(bob, "prod-deploy:deploy")
    write(path, {"policies": [{"server": "staging", "approvers": {"groups": ["release-managers"]}}]})
    assert not policies.current().approves(bob, "prod-deploy:deploy")
    assert policies.current().approves(bob, "staging:deploy")


def test_a_changed_file_that_no_longer_parses_keeps_the_policies_in_force_and_logs_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="maka.interaction.policy")
    path = write(tmp_path / "policies.json", RELEASE)
    policies = PolicyFile(path)
    staged = path.with_suffix(".new")
    staged.write_text('{"policies": [{"approvers": {"groups": "secret-group-name"}}]}')
    os.replace(staged, path)
    assert policies.current().approves(person("bob@example.com", "release-managers"), "prod-deploy:deploy")
    assert [r.getMessage() for r in caplog.records] == ["approver_policies_invalid"]
    assert "secret-group-name" not in caplog.text


def test_a_deleted_file_revokes_its_approvers_logs_it_once_and_a_file_put_back_is_read_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="maka.interaction.policy")
    path = write(tmp_path / "policies.json", RELEASE)
    policies = PolicyFile(path)
    bob = person("bob@example.com", "release-managers")
    assert policies.current().approves(bob, "prod-deploy:deploy")
    path.unlink()
    assert policies.current() == Policies()
    assert policies.current() == Policies()
    assert [r.getMessage() for r in caplog.records].count("approver_policies_removed") == 1
    write(path, RELEASE)
    assert policies.current().approves(bob, "prod-deploy:deploy")


def test_an_in_place_rewrite_that_restores_mtime_and_size_is_read_again(tmp_path: Path) -> None:
    path = write(tmp_path / "policies.json", RELEASE)
    before = os.stat(path)
    policies = PolicyFile(path)
    bob = person("bob@example.com", "release-managers")
    assert policies.current().approves(bob, "prod-deploy:deploy")
    swapped = json.dumps(RELEASE).replace("release-managers", "release-approver")
    assert len(swapped) == before.st_size
    with path.open("r+") as file:  # same inode, same size, then the old mtime back (cp -p, rsync -t)
        file.write(swapped)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_mtime_ns, after.st_size, after.st_ino) == (before.st_mtime_ns, before.st_size, before.st_ino)
    assert not policies.current().approves(bob, "prod-deploy:deploy")
    assert policies.current().approves(person("bob@example.com", "release-approver"), "prod-deploy:deploy")
