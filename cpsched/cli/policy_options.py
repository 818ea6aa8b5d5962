"""Command-line options made from the policy's fields, so the CLI and the service's config
share one set of names, defaults and help texts.

``@policy_options`` gives a command one ``--field-name`` option per field of
:class:`~cpsched.runtime.policy.Policy` (names with ``_`` read with ``-``), offers the
allowed values of a choice (typer reads the ``Literal``), and hands the command one
validated ``policy`` argument. A setting added to the policy is an option of every such
command at once.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import typer

from cpsched.runtime.policy import Policy

Command = TypeVar("Command", bound=Callable[..., Any])

ALIASES: dict[str, tuple[str, ...]] = {"deadline": ("--cp-deadline",)}
"""Older spellings kept working (docs and scripts use them)."""


def _option(name: str) -> inspect.Parameter:
    field = Policy.model_fields[name]
    annotation: Any = field.annotation
    flag = "--" + name.replace("_", "-")
    decls = [flag, *ALIASES.get(name, ())]
    options: dict[str, Any] = {"help": field.description, "show_default": True}
    if annotation is bool:
        decls = [f"{flag}/--no-{flag[2:]}"]
    elif get_origin(annotation) in (Union, types.UnionType):
        (inner,) = [a for a in get_args(annotation) if a is not type(None)]
        annotation = inner | None
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=field.default,
        annotation=Annotated[annotation, typer.Option(*decls, **options)],
    )


def policy_options(command: Command | None = None, *, exclude: frozenset[str] = frozenset()) -> Any:
    """``command`` with the policy's options in place of its ``policy`` parameter.

    ``exclude`` names fields the command sets itself (``compare`` runs several
    dispatchers): they keep the policy's default and get no option.
    """

    def decorate(command: Command) -> Command:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "policy"]
        fields = [name for name in Policy.model_fields if name not in exclude]

        @functools.wraps(command)
        def with_policy(**values: Any) -> Any:
            chosen = {name: values.pop(name) for name in fields}
            return command(**values, policy=Policy.parse(chosen, where="options"))

        parameters = [*own, *(_option(name) for name in fields)]
        with_policy.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        with_policy.__annotations__ = {p.name: p.annotation for p in parameters}
        del with_policy.__wrapped__  # typer must see the new signature, not the command's
        return with_policy  # type: ignore[return-value]

    return decorate if command is None else decorate(command)
