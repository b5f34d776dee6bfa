"""The serving certificate for ``desched run``: given files, or a self-signed one (as upstream)."""

from __future__ import annotations

import datetime
import socket
import tempfile
from pathlib import Path

from desched.api.errors import UserError


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
    except OSError as e:
        raise UserError("--cert-dir", f"cannot create {directory}: {e.strerror or e}") from None
    _self_signed(cert, key)
    return str(cert), str(key)


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
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    key_path.chmod(0o600)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
