"""Realistic secrets as agents' logs hold them: each a line of text around one secret.

None is a live credential: each has the format of its kind (prefix, length, alphabet) and is
made up or is a provider's published example. `{}` marks where the secret sits in the line.
"""

from __future__ import annotations

from typing import NamedTuple


class Kind(NamedTuple):
    name: str
    line: str
    """The text around the secret; `{}` is replaced by it."""
    secret: str


B64 = "lJzRc1YdHaAA2KCNJJ1tkYwF/+mKK6Ygw0NGe170Xu592euJv2wYUtBlV8z+qnlcNQSnIYVTkLWntUO1F8j8rQ=="
PEM_BODY = (
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0/"
    "IzW7yWR7QkrmBL7jT"
)

KINDS: tuple[Kind, ...] = (
    Kind(
        "openai-project-key",
        "export OPENAI_API_KEY={}",
        "sk-proj-" + "Xy9" * 16 + "T3BlbkFJ" + "q" * 20,
    ),
    Kind("openai-legacy-key", "openai.api_key = '{}'", "sk-" + "T3BlbkFJ" + "a1B2c3D4e5" * 4),
    Kind("anthropic-key", "ANTHROPIC_API_KEY={}", "sk-ant-api03-" + "AbCdEf0123_-" * 8 + "AA"),
    Kind("aws-access-key-id", "aws_access_key_id = {}", "AKIAIOSFODNN7EXAMPLE"),
    Kind(
        "aws-secret-access-key",
        "aws_secret_access_key = {}",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    Kind(
        "aws-sts-secret-json",
        '{{"AccessKeyId": "ASIAY34FZKBOKMUTVV7A", "SecretAccessKey": "{}"}}',
        "9drTJvcXLB89EXAMPLELB8923FB892xMFI/K7MDE",
    ),
    Kind(
        "aws-sts-session-token",
        '"SessionToken": "{}"',
        "FwoGZXIvYXdzEBYaDHqa0AP1/Ol2QGMWCyKBAY" + "x7Kd3/qP9w" * 8,
    ),
    Kind(
        "github-classic-token",
        "git push https://{}@github.com/o/r",
        "ghp_" + "a1B2c3D4e5F6g7H8i9J0" + "k1L2m3N4o5P6q7R8",
    ),
    Kind(
        "github-fine-grained",
        "GH_TOKEN={}",
        "github_pat_11ABCDEFG0" + "abcdEFGH1234_" * 6 + "xyzXYZ12",
    ),
    Kind("gitlab-token", "PRIVATE-TOKEN: {}", "glpat-" + "AbCdEf12345678-_xyZW"),
    Kind(
        "slack-bot-token",
        "SLACK_BOT_TOKEN={}",
        "xoxb-" + "2400000000000-2400000000001-" + "AbCdEfGhIjKlMnOpQrStUvWx",
    ),
    Kind(
        "slack-app-token", "SLACK_APP_TOKEN={}", "xapp-1-A0123ABCDEF-2400000000000-" + "ab12" * 16
    ),
    Kind(
        "slack-webhook",
        "curl -X POST {}",
        "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    ),
    Kind("stripe-secret-key", 'stripe.api_key = "{}"', "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"),
    Kind(
        "stripe-webhook-secret",
        "STRIPE_WEBHOOK_SECRET={}",
        "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    ),
    Kind("google-api-key", "key={}&q=paris", "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"),
    Kind(
        "gcp-private-key-id",
        '"private_key_id": "{}",',
        "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    ),
    Kind(
        "gcp-service-account-key",
        '"private_key": "{}",',
        "-----BEGIN PRIVATE KEY-----\\n" + PEM_BODY + "\\n-----END PRIVATE KEY-----\\n",
    ),
    Kind(
        "rsa-private-key",
        "cat id_rsa\n{}\n$",
        "-----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY + "\n-----END RSA PRIVATE KEY-----",
    ),
    Kind(
        "private-key-cut-off",
        "head -c 200 key.pem\n{}",
        "-----BEGIN PRIVATE KEY-----\n" + PEM_BODY,
    ),
    Kind(
        "openssh-private-key",
        "{}\n",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"
        "\n-----END OPENSSH PRIVATE KEY-----",
    ),
    Kind(
        "pgp-private-key",
        "gpg --export-secret-keys -a\n{}",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGJ0x2MBCADQ"
        + PEM_BODY
        + "\n=ab12\n-----END PGP PRIVATE KEY BLOCK-----",
    ),
    Kind(
        "jwt",
        "Cookie: session={}",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    Kind("bearer-token", "Authorization: Bearer {}", "ya29.a0AfH6SMBx" + "Kq9vL2mN8pR4sT6u" * 3),
    Kind("basic-auth-header", "Authorization: Basic {}", "YWxhZGRpbjpvcGVuc2VzYW1lMTIz"),
    Kind("url-password", "psql postgres://admin:{}@db.internal:5432/app", "S3cretPassw0rd"),
    Kind("url-password-with-slash", "DATABASE_URL=mysql://app:{}@10.0.0.5/app", "p/ss+w0rd=Xy"),
    Kind("url-password-empty-user", "REDIS_URL=redis://:{}@cache:6379/0", "Hunter2RedisPw"),
    Kind("env-db-password", "DB_PASSWORD={}", "correct-horse-battery-staple"),
    Kind("env-secret-key", "SECRET_KEY={}", "django-insecure-7f$2k9!xq@z#m4w&v8b"),
    Kind("json-password", '{{"username": "admin", "password": "{}"}}', "Tr0ub4dor&3xyz"),
    Kind("yaml-password", "  password: {}\n  host: db", "Yaml-S3cret-Pw!"),
    Kind("hex-api-key", "API_KEY={}", "9f86d081884c7d659a2feaa0c55ad015"),
    Kind(
        "sendgrid-key",
        "SENDGRID_API_KEY={}",
        "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",
    ),
    Kind("twilio-api-key", "TWILIO_API_KEY={}", "SK" + "0123456789abcdef" * 2),
    Kind("twilio-account-sid", "account_sid = '{}'", "AC" + "fedcba9876543210" * 2),
    Kind(
        "azure-storage-key",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={};EndpointSuffix=core.windows.net",
        B64,
    ),
    Kind("huggingface-token", "HF_TOKEN={}", "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"),
    Kind(
        "npm-token",
        "//registry.npmjs.org/:_authToken={}",
        "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    ),
    Kind("pypi-token", "password = {}", "pypi-AgEIcHlwaS5vcmc" + "CJDk5YjQ2OTctZjA2Ny00" * 4),
    Kind("mailchimp-key", "MAILCHIMP_KEY={}", "0123456789abcdef0123456789abcdef-us12"),
    Kind(
        "discord-bot-token",
        "DISCORD_TOKEN={}",
        "MTAxMjM0NTY3ODkwMTIzNDU2Nw.GaBcDe.abcdefghijklmnopqrstuvwxyz0123456789AB",
    ),
    Kind("telegram-bot-token", "bot{}/getUpdates", "110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawX"),
    Kind(
        "square-oauth-secret",
        "SQUARE_SECRET={}",
        "sq0csp-" + "0123456789ABCDEFGHIJ" + "abcdefghijklmnopqrstuv",
    ),
    Kind(
        "secret-as-json-key",
        '{{"{}": {{"scopes": ["read"]}}}}',
        "sk-proj-" + "Kk7" * 16 + "T3BlbkFJ" + "z" * 20,
    ),
)

# Text that looks like a secret to a careless rule and is none: kept as it is.
NOT_SECRETS: tuple[str, ...] = (
    "export GITLAB_TOKEN=${GITLAB_TOKEN}",
    'token = os.environ["GITHUB_TOKEN"]',
    "git clone https://oauth2:***@gitlab.com/group/repo.git",
    "password = get_password()",
    "password: {{ vault_password }}",
    "commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904 (HEAD -> main)",
    "gt_data_hash ea1402bc4f27311c55d06e318cef7d22ed1f33431a33ada16db71c4177283103",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "https://example.com/docs?page=2&sort=asc",
    "user_id: mia_li_3668, reservation NO6JO3",
    "the api_key field is required (see docs)",
    "def check_password(self, password):",
    "SECRET_KEY = env('SECRET_KEY')",
)
