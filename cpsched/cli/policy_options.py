"""Command-line options made from the policy's fields, so the CLI and the service's config
share one set of names, defaults and help texts.

``@policy_options`` gives a command ``--policy NAME`` (a named policy: today, easy++,
default...) and one ``--field-name`` option per field of
:class:`~cpsched.runtime.policy.Policy` (names with ``_`` read with ``-``) that overrides
the named policy's value, offers the allowed values of a choice (typer reads the
``Literal``), and hands the command one validated ``policy`` argument. A setting added to
the policy is an option of every such command at once.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import typer

from cpsched.runtime.policy import NAMED_POLICIES, Policy

Command = TypeVar("Command", bound=Callable[..., Any])

ALIASES: dict[str, tuple[str, ...]] = {"deadline": ("--cp-deadline",)}
"""Older spellings kept working (docs and scripts use them)."""
LISTED_CHOICES = 50
"""Characters of a choice's values (``a|b|c``) shown in the option's metavar at most; a
longer list goes into its help text, so that help fits 80 columns."""


def _option(name: str) -> inspect.Parameter:
    field = Policy.model_fields[name]
    annotation: Any = field.annotation
    flag = "--" + name.replace("_", "-")
    decls = [flag, *ALIASES.get(name, ())]
    # Unset options are None: the named policy's value (the field default, in "default").
    default = field.default if field.default is not None else "none"
    options: dict[str, Any] = {
        "help": f"{field.description} [default policy: {default}]",
        "show_default": False,
    }
    if annotation is bool:
        decls = [f"{flag}/--no-{flag[2:]}"]
    elif get_origin(annotation) in (Union, types.UnionType):
        (annotation,) = [a for a in get_args(annotation) if a is not type(None)]
    choices = [str(value) for value in get_args(annotation)]
    if get_origin(annotation) is Literal and len("|".join(choices)) > LISTED_CHOICES:
        options["metavar"] = "<name>"
        options["help"] = f"{field.description} One of: {', '.join(choices)}. " + (
            f"[default policy: {default}]"
        )
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[annotation | None, typer.Option(*decls, **options)],
    )


POLICY_OPTION = inspect.Parameter(
    "policy",
    inspect.Parameter.KEYWORD_ONLY,
    default="default",
    annotation=Annotated[
        str,
        typer.Option(
            "--policy",
            help=f"Named policy to start from: {', '.join(NAMED_POLICIES)}; the options "
            "below override its settings.",
        ),
    ],
)


def policy_options(
    command: Command | None = None, *, exclude: frozenset[str] = frozenset(), raw: bool = False
) -> Any:
    """``command`` with the policy's options in place of its ``policy`` parameter.

    ``exclude`` names fields the command sets itself: they keep the policy's value and get
    no option. ``raw`` hands the command, instead of a policy, the values given (with
    ``policy``, the name): ``compare`` lays them over each policy it runs.
    """

    def decorate(command: Command) -> Command:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "policy"]
        fields = [name for name in Policy.model_fields if name not in exclude]

        @functools.wraps(command)
        def with_policy(**values: Any) -> Any:
            chosen = {name: value for name in fields if (value := values.pop(name)) is not None}
            chosen["policy"] = values.pop("policy")
            if raw:
                Policy.parse(chosen, where="options")  # a typo fails before anything runs
                return command(**values, policy=chosen)
            return command(**values, policy=Policy.parse(chosen, where="options"))

        parameters = [*own, POLICY_OPTION, *(_option(name) for name in fields)]
        with_policy.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        with_policy.__annotations__ = {p.name: p.annotation for p in parameters}
        del with_policy.__wrapped__  # typer must see the new signature, not the command's
        return with_policy  # type: ignore[return-value]

    return decorate if command is None else decorate(command)
