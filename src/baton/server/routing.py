"""Routes whose arguments are simple enough to hand over without FastAPI's dependency solver.

FastAPI solves every request's arguments generically: each parameter kind is looked up, each
dependency level solved, a spare ``Response`` built for the dependencies' headers. For a hot
read such as ``GET /v1/runs/{id}`` (a path parameter, the request, the caller) that was about
half of what the server ran per request. :class:`DirectRoute` is FastAPI's ``APIRoute`` — the
same endpoint, the same OpenAPI operation, the same error handling around it — whose handler,
when the operation takes nothing but

- path parameters typed ``str`` with no constraints (any matched segment is valid),
- the ``Request``,
- dependencies that themselves take only the ``Request`` (the scope check of ``_access``),

and returns a ``Response`` itself, calls the dependencies and then the endpoint directly, in the
order FastAPI would (dependencies first, so 401/403 come before anything else). Any other
operation keeps FastAPI's handler, and so does every request while dependency overrides are set
or FastAPI's own telemetry records the request (its spans of the dependencies and the endpoint).

:func:`add_routers` puts the routers' routes in the application itself: FastAPI matches the
routes of an included router twice per request (once to choose the router, once inside it).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, APIRouter
from fastapi.telemetry import get_telemetry_data
from starlette.requests import Request
from starlette.responses import Response

__all__ = ["DirectRoute", "add_routers", "direct_plan"]

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class DirectPlan(typing.NamedTuple):
    """How to call an operation's endpoint: keyword names for each kind of argument."""

    dependencies: tuple[tuple[str, Callable[[Request], Awaitable[Any]]], ...]
    path_params: tuple[str, ...]
    request: str | None


def direct_plan(dependant: Dependant) -> DirectPlan | None:
    """The plan for calling the endpoint of ``dependant`` directly, or None if FastAPI must."""
    if not _takes_only_request_and_path(dependant) or not _returns_response(dependant.call):
        return None
    dependencies = []
    for dependency in dependant.dependencies:
        call = dependency.call
        if (
            call is None
            or dependency.name is None
            or dependency.path_params
            or dependency.dependencies
            or dependency.request_param_name is None
            or not _is_coroutine(call)
            or not _takes_only_request_and_path(dependency)
        ):
            return None
        dependencies.append((dependency.name, call))
    path_params = []
    for field in dependant.path_params:
        info = field.field_info
        if info.annotation is not str or info.metadata or field.alias != field.name:
            return None
        path_params.append(field.name)
    return DirectPlan(tuple(dependencies), tuple(path_params), dependant.request_param_name)


class DirectRoute(APIRoute):
    """``APIRoute`` calling a simple operation's endpoint without the generic solver."""

    def get_route_handler(self) -> Handler:
        solved = super().get_route_handler()
        plan = direct_plan(self.dependant)
        endpoint = self.dependant.call
        if plan is None or endpoint is None:
            return solved
        overrides = self.dependency_overrides_provider
        dependencies, path_params, request_name = plan

        async def handler(request: Request) -> Response:
            if get_telemetry_data() is not None or (overrides is not None and overrides.dependency_overrides):
                return await solved(request)
            arguments: dict[str, Any] = {}
            for name, dependency in dependencies:
                arguments[name] = await dependency(request)
            values = request.scope["path_params"]
            for name in path_params:
                arguments[name] = values[name]
            if request_name is not None:
                arguments[request_name] = request
            response: Response = await endpoint(**arguments)
            return response

        return handler


def add_routers(app: FastAPI, *routers: APIRouter) -> None:
    """Every route of ``routers``, in order, as a route of ``app`` itself.

    The routers' prefixes, tags and responses are already in their routes; a router that
    includes another is refused (include both here instead).
    """
    for router in routers:
        for route in router.routes:
            if not isinstance(route, APIRoute):
                raise TypeError(f"{route!r}: add_routers takes routers of APIRoutes only")
            app.router.routes.append(route)


def _takes_only_request_and_path(dependant: Dependant) -> bool:
    return not (
        dependant.query_params
        or dependant.header_params
        or dependant.cookie_params
        or dependant.body_params
        or dependant.websocket_param_name
        or dependant.http_connection_param_name
        or dependant.response_param_name
        or dependant.background_tasks_param_name
        or dependant.security_scopes_param_name
    )


def _is_coroutine(call: Callable[..., Any]) -> bool:
    if inspect.isroutine(call):
        return inspect.iscoroutinefunction(call)
    return inspect.iscoroutinefunction(getattr(call, "__call__", None))  # noqa: B004


def _returns_response(call: Callable[..., Any] | None) -> bool:
    if call is None or not _is_coroutine(call):
        return False
    try:
        returned = typing.get_type_hints(call).get("return")
    except (NameError, TypeError):
        return False
    return isinstance(returned, type) and issubclass(returned, Response)
