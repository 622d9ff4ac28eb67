"""A throwaway RS256 key pair and one bearer token for the load harness.

Usage: python3 jwt.py DIR ISSUER AUDIENCE
Writes DIR/bench.key (a fresh RSA-2048 private key, made by `openssl genpkey`)
and DIR/jwks.json (its public half, kid `bench`), then prints a token for
subject `bench-user` valid for one hour. Only the standard library and the
openssl CLI: nothing leaves the machine, nothing needs building.
"""

import base64
import json
import subprocess
import sys
import time


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def openssl(*args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(["openssl", *args], input=data, capture_output=True, check=True).stdout


def main() -> None:
    folder, issuer, audience = sys.argv[1:4]
    key = f"{folder}/bench.key"
    openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", key)
    modulus = openssl("rsa", "-in", key, "-noout", "-modulus").decode().strip().split("=", 1)[1]
    text = openssl("rsa", "-in", key, "-noout", "-text").decode()
    exponent = int(text.split("publicExponent:")[1].split()[0])
    jwk = {
        "kty": "RSA", "kid": "bench", "alg": "RS256", "use": "sig",
        "n": b64(bytes.fromhex(modulus)),
        "e": b64(exponent.to_bytes((exponent.bit_length() + 7) // 8, "big")),
    }
    with open(f"{folder}/jwks.json", "w") as f:
        json.dump({"keys": [jwk]}, f)
    now = int(time.time())
    header = b64(json.dumps({"alg": "RS256", "typ": "JWT", "kid": "bench"}).encode())
    claims = b64(json.dumps({
        "iss": issuer, "aud": audience, "sub": "bench-user",
        "iat": now, "exp": now + 3600, "scope": "tools.read",
    }).encode())
    signature = openssl("dgst", "-sha256", "-sign", key, data=f"{header}.{claims}".encode())
    print(f"{header}.{claims}.{b64(signature)}")


if __name__ == "__main__":
    main()
