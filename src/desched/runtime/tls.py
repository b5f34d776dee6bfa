"""The serving certificate for ``desched run``: given files, or a self-signed one (as upstream).

Processes that share a ``--cert-dir`` (two replicas given one host directory, a restart racing
the old process) make the pair under an exclusive lock on a file in that directory, and write
each file whole under a temporary name before renaming it, so each finds either no pair or one
whose key matches its certificate.
"""

from __future__ import annotations

import datetime
import fcntl
import os
import socket
import ssl
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from desched.errors import UserError


def serving_certificate(cert_file: str, key_file: str, cert_dir: str) -> tuple[str, str]:
    if cert_file or key_file:
        if not (cert_file and key_file):
            raise UserError("--tls-cert-file", "needs --tls-private-key-file too (and the other way round)")
        for flag, f in (("--tls-cert-file", cert_file), ("--tls-private-key-file", key_file)):
            if not Path(f).is_file():
                raise UserError(flag, f"file {f} does not exist")
        return cert_file, key_file
    directory = Path(cert_dir) if cert_dir else Path(tempfile.mkdtemp(prefix="desched-certs-"))
    cert, key = directory / "desched.crt", directory / "desched.key"
    if cert.is_file() and key.is_file():
        return str(cert), str(key)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with open(directory / ".desched-cert.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
            if not (cert.is_file() and key.is_file()):  # another process may have made it meanwhile
                _self_signed(cert, key)
    except OSError as e:
        raise UserError("--cert-dir", f"cannot write in {directory}: {e.strerror or e}") from None
    return str(cert), str(key)


def _write_whole(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` under a temporary name in ``path``'s directory, then rename it to ``path``:
    a reader sees the old file or the new one, never a part."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _self_signed(cert_path: Path, key_path: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    host = socket.gethostname()
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"desched@{host}")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(host), x509.DNSName("localhost")]), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    pem_key = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    _write_whole(key_path, pem_key, 0o600)
    _write_whole(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)


#: Go's TLS version names (--tls-min-version) and what they mean here.
TLS_VERSIONS = {
    "VersionTLS10": ssl.TLSVersion.TLSv1,
    "VersionTLS11": ssl.TLSVersion.TLSv1_1,
    "VersionTLS12": ssl.TLSVersion.TLSv1_2,
    "VersionTLS13": ssl.TLSVersion.TLSv1_3,
}

#: --tls-cipher-suites takes IANA names, as Go; OpenSSL knows the TLS 1.2 ones by other names.
#: TLS 1.3 suites cannot be chosen (not in Go either): they are accepted and always on.
_TLS12_SUITES = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": "ECDHE-RSA-DES-CBC3-SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA": "ECDHE-ECDSA-RC4-SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA": "ECDHE-RSA-RC4-SHA",
    "TLS_RSA_WITH_RC4_128_SHA": "RC4-SHA",
}
_TLS13_SUITES = frozenset(
    {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
)


#: --tls-curve-preferences (apiserver's serving flag) takes Go's tls.CurveID numbers; desched also
#: takes Go's names for them. Each maps to OpenSSL's name for the group.
TLS_CURVES: dict[int, tuple[str, str]] = {
    23: ("CurveP256", "prime256v1"),
    24: ("CurveP384", "secp384r1"),
    25: ("CurveP521", "secp521r1"),
    29: ("X25519", "X25519"),
    4588: ("X25519MLKEM768", "X25519MLKEM768"),
}
_CURVE_NAMES = {go.lower(): number for number, (go, _) in TLS_CURVES.items()} | {
    "p256": 23,
    "p384": 24,
    "p521": 25,
}


def parse_curves(values: Sequence[str]) -> list[int]:
    """The curve IDs of --tls-curve-preferences (``23,29`` or ``CurveP256,X25519``), in order."""
    known = ", ".join(f"{n} ({go})" for n, (go, _) in TLS_CURVES.items())
    ids: list[int] = []
    for value in values:
        text = value.strip()
        number = int(text) if text.isdigit() else _CURVE_NAMES.get(text.lower(), -1)
        if number not in TLS_CURVES:
            raise UserError("--tls-curve-preferences", f"unknown curve {value!r} (known: {known})")
        if number in ids:
            raise UserError("--tls-curve-preferences", f"curve {value!r} is listed twice")
        ids.append(number)
    return ids


def apply_curves(ctx: Any, curves: Sequence[int]) -> bool:
    """Offer ``curves`` for key exchange, in that order, where Python's ssl module can: True when
    applied.

    ``SSLContext.set_groups`` (newer Pythons) takes the whole list, as Go does. Before it there is
    only ``set_ecdh_curve``, one curve, and on Python 3.11 with OpenSSL 3.0 it does not restrict
    what a server negotiates (a P-256-only client still got P-256 from a context set to P-384,
    checked with ``openssl s_client -groups``), so it is not used: the list is then checked and
    logged as not applied, and the TLS library's defaults stay.
    """
    set_groups = getattr(ctx, "set_groups", None)
    if not curves or set_groups is None:
        return False
    try:
        set_groups(":".join(TLS_CURVES[n][1] for n in curves))
    except (ValueError, ssl.SSLError) as e:
        raise UserError("--tls-curve-preferences", f"not supported by {ssl.OPENSSL_VERSION}: {e}") from None
    return True


def _base_context(
    cert: str, key: str, min_version: str, cipher_suites: Sequence[str], curves: Sequence[int] = ()
) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = TLS_VERSIONS.get(min_version or "VersionTLS12", ssl.TLSVersion.TLSv1_2)
    apply_curves(ctx, curves)
    if cipher_suites:
        unknown = [s for s in cipher_suites if s not in _TLS12_SUITES and s not in _TLS13_SUITES]
        if unknown:
            raise UserError("--tls-cipher-suites", f"unknown cipher suite {unknown[0]!r}")
        names = [_TLS12_SUITES[s] for s in cipher_suites if s in _TLS12_SUITES]
        if names:
            try:
                ctx.set_ciphers(":".join(names))
            except ssl.SSLError:
                raise UserError(
                    "--tls-cipher-suites", "none of these suites is supported by this TLS library"
                ) from None
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as e:
        raise UserError("--tls-cert-file", f"cannot load {cert} / {key}: {e}") from None
    return ctx


def _names_in_certificate(path: str) -> list[str]:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    try:
        cert = x509.load_pem_x509_certificate(Path(path).read_bytes())
    except (OSError, ValueError) as e:
        raise UserError("--tls-sni-cert-key", f"cannot read certificate {path}: {e}") from None
    names = [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names += san.get_values_for_type(x509.DNSName)
        names += [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    except x509.ExtensionNotFound:
        pass
    return names


def _matches(pattern: str, name: str) -> bool:
    if pattern.startswith("*."):
        head, _, rest = name.partition(".")
        return bool(head) and rest == pattern[2:]
    return pattern == name


def server_context(
    cert: str,
    key: str,
    *,
    min_version: str = "",
    cipher_suites: Sequence[str] = (),
    sni_cert_keys: Sequence[str] = (),
    curves: Sequence[int] = (),
) -> ssl.SSLContext:
    """The serving TLS context, as apiserver's secure serving options set it up.

    ``sni_cert_keys`` are ``cert,key[:name,...]`` (--tls-sni-cert-key): a client asking for a
    name (SNI) gets that certificate; explicit names win over names read from the certificate,
    exact names over wildcards; anything else gets the default certificate.
    """
    default = _base_context(cert, key, min_version, cipher_suites)
    exact: dict[str, ssl.SSLContext] = {}
    wildcard: list[tuple[str, ssl.SSLContext]] = []
    extracted: list[tuple[str, ssl.SSLContext]] = []
    for spec in sni_cert_keys:
        pair, _, names_text = spec.partition(":")
        files = [p.strip() for p in pair.split(",")]
        if len(files) != 2 or not all(files):
            raise UserError("--tls-sni-cert-key", f"expected cert,key[:name,...], got {spec!r}")
        ctx = _base_context(files[0], files[1], min_version, cipher_suites, curves)
        explicit = [n.strip() for n in names_text.split(",") if n.strip()]
        if explicit:
            for name in explicit:
                if name.startswith("*."):
                    wildcard.append((name, ctx))
                else:
                    exact.setdefault(name, ctx)
        else:
            extracted.extend((name, ctx) for name in _names_in_certificate(files[0]))

    def pick(name: str) -> ssl.SSLContext | None:
        if name in exact:
            return exact[name]
        for pattern, ctx in wildcard:
            if _matches(pattern, name):
                return ctx
        for pattern, ctx in extracted:
            if pattern == name:
                return ctx
        for pattern, ctx in extracted:
            if _matches(pattern, name):
                return ctx
        return None

    if sni_cert_keys:

        def on_sni(sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
            chosen = pick(name.lower()) if name else None
            if chosen is not None:
                sock.context = chosen

        default.sni_callback = on_sni
    return default
