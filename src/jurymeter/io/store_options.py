"""Storage options: ``--storage-option`` keys typed and checked for s3fs, and the same store's options for polars' S3 reader."""


from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jurymeter.errors import ConfigError, StoreError

if TYPE_CHECKING:
    pass



# Flat ``--storage-option`` keys and the type each must have. Values from the
# command line arrive as text: "false" is truthy, so booleans must be parsed.
_S3_BOOL_OPTIONS = frozenset(
    {
        "anon",
        "use_ssl",
        "requester_pays",
        "version_aware",
        "cache_regions",
        "fixed_upload_size",
        "local_expiry_check",
        "default_fill_cache",
        "use_listings_cache",
        "skip_instance_cache",
    }
)
_S3_INT_OPTIONS = frozenset({"default_block_size", "max_concurrency", "max_paths"})
_S3_FLOAT_OPTIONS = frozenset({"listings_expiry_time"})
_S3_TEXT_OPTIONS = frozenset(
    {"key", "secret", "token", "username", "password", "profile", "default_cache_type"}
)
_S3_TABLE_OPTIONS = frozenset({"client_kwargs", "config_kwargs", "s3_additional_kwargs"})
_S3_CLIENT_OPTIONS = {"endpoint_url": "endpoint_url", "region_name": "region_name", "region": "region_name"}
_S3_OPTIONS = (
    _S3_BOOL_OPTIONS
    | _S3_INT_OPTIONS
    | _S3_FLOAT_OPTIONS
    | _S3_TEXT_OPTIONS
    | _S3_TABLE_OPTIONS
    | frozenset(_S3_CLIENT_OPTIONS)
    | {"session"}
)
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


def s3fs_options(options: dict[str, Any]) -> dict[str, Any]:
    """Map flat ``--storage-option`` keys onto s3fs arguments.

    ``endpoint_url`` and ``region`` go into s3fs's ``client_kwargs`` (merged with
    a ``client_kwargs`` table from the config file); text values of boolean and
    numeric options are parsed. An unknown key or a value of the wrong type is a
    :class:`ConfigError` that names the key, never the value (it may be a secret).
    """
    out: dict[str, Any] = {}
    client_kwargs: dict[str, Any] = {}
    for key, value in options.items():
        if key not in _S3_OPTIONS:
            msg = (
                f"unknown storage option {key!r}; known: endpoint_url, region, key, secret, "
                f"token, profile, anon, use_ssl and the other s3fs.S3FileSystem arguments"
            )
            raise ConfigError(msg)
        if key in _S3_CLIENT_OPTIONS:
            client_kwargs[_S3_CLIENT_OPTIONS[key]] = value
        elif key == "client_kwargs":
            if not isinstance(value, dict):
                msg = "storage option client_kwargs must be a table (set it in the --config file)"
                raise ConfigError(msg)
            client_kwargs = {**value, **client_kwargs}
        else:
            out[key] = _typed_option(key, value)
    if client_kwargs:
        out["client_kwargs"] = client_kwargs
    return out


# s3fs options that only tune listing, caching or writing: nothing to map for a reader.
# Every boolean but the two polars has a key for (``anon``, ``requester_pays``;
# ``use_ssl``: the endpoint's scheme says it), every number, and the cache type.
_S3_WRITE_OR_CACHE_OPTIONS = (
    (_S3_BOOL_OPTIONS - {"anon", "requester_pays"})
    | _S3_INT_OPTIONS
    | _S3_FLOAT_OPTIONS
    | {"default_cache_type"}
)
# Hosts whose endpoint polars finds by itself from the region (virtual-hosted requests).
_AWS_HOSTS = (".amazonaws.com", ".amazonaws.com.cn")


def polars_s3_options(
    options: dict[str, Any], *, endpoint_url: str | None = None, region: str | None = None
) -> dict[str, Any] | None:
    """``pl.scan_parquet`` arguments (``storage_options``, ``credential_provider``) for s3fs ``options``.

    ``options`` is what :func:`s3fs_options` returns. ``endpoint_url`` and
    ``region`` are what s3fs's client resolved, used where ``options`` name
    none (an endpoint on an AWS host is left to polars, which addresses buckets
    by region). Keys map onto polars' object-store keys: ``key``/``username``
    -> ``aws_access_key_id``, ``secret``/``password`` ->
    ``aws_secret_access_key``, ``token`` -> ``aws_session_token``, the endpoint
    -> ``aws_endpoint_url`` (with ``aws_allow_http`` for ``http://``), the region
    -> ``aws_region``, ``anon`` -> ``aws_skip_signature``, ``requester_pays`` ->
    ``aws_request_payer``. Without a key, credentials come from botocore's chain
    (``profile`` included), the one s3fs uses. Returns ``None`` when an option
    has no equivalent (``session``, ``config_kwargs``, ``s3_additional_kwargs``,
    other ``client_kwargs``).
    """
    options = dict(options)
    client = dict(options.pop("client_kwargs", {}))
    endpoint = client.pop("endpoint_url", None) or endpoint_url
    region = client.pop("region_name", None) or region
    if client or {"session", "config_kwargs", "s3_additional_kwargs"} & set(options):
        return None
    out: dict[str, str] = {}
    if endpoint and not _is_aws_host(endpoint):
        out["aws_endpoint_url"] = str(endpoint)
        if str(endpoint).lower().startswith("http://"):
            out["aws_allow_http"] = "true"
    if region:
        out["aws_region"] = str(region)
    key = options.pop("key", None) or options.pop("username", None)
    secret = options.pop("secret", None) or options.pop("password", None)
    token = options.pop("token", None)
    profile = options.pop("profile", None)
    anon = bool(options.pop("anon", False))
    if options.pop("requester_pays", False):
        out["aws_request_payer"] = "true"
    if set(options) - _S3_WRITE_OR_CACHE_OPTIONS:
        return None
    provider: Any = None
    if anon:
        out["aws_skip_signature"] = "true"
    elif key and secret:
        out["aws_access_key_id"] = str(key)
        out["aws_secret_access_key"] = str(secret)
        if token:
            out["aws_session_token"] = str(token)
    else:
        provider = _botocore_credentials(profile)
    return {"storage_options": out, "credential_provider": provider}


def _is_aws_host(endpoint: str) -> bool:
    from urllib.parse import urlsplit

    host = (urlsplit(str(endpoint)).hostname or "").lower()
    return host == "amazonaws.com" or host.endswith(_AWS_HOSTS)


@functools.cache
def _botocore_credentials(profile: str | None) -> _BotocoreCredentials:
    """The credential provider of a profile: one per profile, so polars reuses its clients."""
    return _BotocoreCredentials(profile)


@dataclass(frozen=True, slots=True)
class _BotocoreCredentials:
    """A polars credential provider over botocore's credential chain.

    botocore comes with s3fs (through aiobotocore) and looks where s3fs looks:
    the environment, the shared credentials and config files, SSO, container
    and instance metadata. A plain picklable object, so a Store holding it can
    still be pickled.
    """

    profile: str | None

    def __call__(self) -> tuple[dict[str, str], int | None]:
        import botocore.session

        credentials = botocore.session.Session(profile=self.profile).get_credentials()
        frozen = None if credentials is None else credentials.get_frozen_credentials()
        if frozen is None or frozen.access_key is None or frozen.secret_key is None:
            msg = "no AWS credentials found (environment, shared files or instance metadata)"
            raise StoreError(msg)
        out = {"aws_access_key_id": frozen.access_key, "aws_secret_access_key": frozen.secret_key}
        if frozen.token:
            out["aws_session_token"] = frozen.token
        expiry = getattr(credentials, "_expiry_time", None)
        return out, (int(expiry.timestamp()) if expiry is not None else None)


def _typed_option(key: str, value: Any) -> Any:
    if key in _S3_TABLE_OPTIONS and not isinstance(value, dict):
        msg = f"storage option {key} must be a table (set it in the --config file)"
        raise ConfigError(msg)
    if not isinstance(value, str):
        return value
    text = value.strip().lower()
    if key in _S3_BOOL_OPTIONS:
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        msg = f"storage option {key} must be true or false"
        raise ConfigError(msg)
    try:
        if key in _S3_INT_OPTIONS:
            return int(text)
        if key in _S3_FLOAT_OPTIONS:
            return float(text)
    except ValueError:
        msg = f"storage option {key} must be a number"
        raise ConfigError(msg) from None
    return value

