"""The vosti launch-check extension surface (pluggy project name ``vosti``).

Third-party packages add rules by exposing a module or object with ``@hookimpl`` functions under the
entry-point group ``vosti.launch_checks``. Every hook receives the final ``LaunchFacts`` (model geometry,
kernel configs, engine settings) that vosti derived from the engine config.
"""
from __future__ import annotations

import pluggy

PROJECT = "vosti"
ENTRY_POINT_GROUP = "vosti.launch_checks"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def vosti_launch_obligations(facts):
    """Called once per launch check, in every process that runs it (engine config build, scheduler
    init, each worker). Return an iterable of ``Obligation`` objects; each is evaluated against
    ``facts`` and a failed one refuses the launch. Return None to add nothing."""


@hookspec
def vosti_check_launch(facts, failures):
    """Called after every obligation was evaluated, with the list of failed ``Obligation`` results so
    far (read-only). Return an iterable of ``Failure`` objects to veto the launch, or None to accept.
    This is where a deployment adds rules that are not a single predicate (e.g. an allow-list of
    models)."""


@hookspec
def vosti_certificate(facts, certificate):
    """Called when the launch was accepted, with the certificate dict about to be written. Return a
    dict of extra fields to merge in (e.g. a deployment id), or None."""
