"""Realistic secrets as agents' logs hold them: each a line of text around one secret.

None is a live credential: each has the format of its kind (prefix, length, alphabet) and is
made up or is a provider's published example. `{}` marks where the secret sits in the line.

`KINDS` is written by hand (the kinds agents' logs hold most, and every kind an attack found
leaking); `gitleaks_kinds()` adds one per gitleaks rule, its value drawn at random (seeded) from
the rule's own expression and set in an assignment or on its own, and checked to be caught by
that rule alone.
"""

from __future__ import annotations

import base64
import importlib
import random
from functools import cache
from typing import Any, NamedTuple


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
    # --- the kinds an attack on 0.1 found leaking (issue 42) --------------------------------
    Kind(
        "aws-credentials-ini",
        "[default]\naws_access_key_id = AKIA2E0A8F3B244C9986\naws_secret_access_key = {}\n"
        "region = eu-west-1",
        "7nK2pQ9vXe4LmR8sT1uW3yZ5aB6cD0fG2hJ4kL6m",
    ),
    Kind("hex-api-key-40", "API_KEY={}", "3f1c9a7e2b8d4f60a5c3e9b1d7f2a8c4e6b0d9f3"),
    Kind(
        "azure-sas-sig",
        "az storage blob download --blob-url 'https://acmebackups.blob.core.windows.net/db/"
        "prod.bak?sv=2022-11-02&ss=b&srt=o&sp=r&se=2026-03-01T00:00:00Z&spr=https&sig={}'",
        "q8N%2Bf3LkP0xZ7vR2mT9wY4cB6dH1jS5aE8gU3iO0%3D",
    ),
    Kind("digitalocean-pat", "DIGITALOCEAN_ACCESS_TOKEN={}", "dop_v1_" + "8e1f4c7a0b3d6e92" * 4),
    Kind(
        "cloudflare-api-token",
        "export CLOUDFLARE_API_TOKEN={}",
        "Xk3_9pQvT2mL8wRz-4bN7cJ1hF6dS0aYgE5uK2iO",
    ),
    Kind(
        "cloudflare-global-api-key",
        'curl -H "X-Auth-Email: ops@acme.io" -H "X-Auth-Key: {}" '
        "https://api.cloudflare.com/client/v4/zones",
        "1e4f7a9c2b5d8e0f3a6c9b2d5e8f1a4c7b0d3",
    ),
    Kind("alibaba-access-key-id", "ALIBABA_CLOUD_ACCESS_KEY_ID={}", "LTAI5tRq8Zx2Wc9Lm4Np7Vb3"),
    Kind(
        "alibaba-secret-key",
        "alibaba_cloud_access_key_secret = {}",
        "Qx7Lm2Np9Rt4Vw8Yz3Bc6Df1Gh5Jk0",
    ),
    Kind("heroku-api-key", "HEROKU_API_KEY={}", "9c2f5e8a-1b4d-4f7a-8c3e-6d9b2a5f8e1c"),
    Kind(
        "heroku-api-key-v2",
        "heroku auth:token\n{}",
        "HRKU-AA" + "q7Wm2Xk9Lp4Rz8Tn3Vb6Yc1Hd5Jf0Gs2Ka7Eu9Oi4Pl6Mn8Bx3Cv5Zq1Wr",
    ),
    Kind(
        "putty-private-key",
        "cat deploy.ppk\nPuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\n"
        "Comment: deploy@ci\nPublic-Lines: 2\nAAAAC3NzaC1lZDI1NTE5AAAAIHq8\n"
        "Zr2mW9xK4pL7vB1nT5cY8dF3gJ6hS0aQ\nPrivate-Lines: 1\n{}\n",
        "AAAAIGk1N3ZyQnB5dTM5ZWxrdmJ5bXp0cXh3aG5mYWRzZ2pxMHk=\n"
        "Private-MAC: 5b2c9e7f1a4d8b3c6e0f2a5d9b7c1e4f8a3d6b0c2e5f9a7d1b4c8e3f6a0d2b5c",
    ),
    Kind("jwt-secret-plain", "JWT_SECRET={}", "mysupersecretjwtsigningkey"),
    Kind("export-password", "export PASSWORD='{}'", "Winter2024!Deploy"),
    Kind("export-password-plain", "export PASSWORD={}", "correcthorsebattery"),
    Kind("shopify-access-token", "SHOPIFY_ACCESS_TOKEN={}", "shpat_" + "4f9a2c7e1b8d3f6a" * 2),
    Kind("databricks-token", "DATABRICKS_TOKEN={}", "dapi" + "0c7e4a1f9b2d5e8c" * 2),
    Kind(
        "odbc-connection-string",
        "Driver={{ODBC Driver 18 for SQL Server}};Server=tcp:sql-prod.database.windows.net,1433;"
        "Database=orders;Uid=svc_orders;Pwd={};Encrypt=yes;",
        "Qv7!mK2#pL9x",
    ),
    Kind(
        "odbc-braced-password",
        "DRIVER={{PostgreSQL Unicode}};SERVER=db;UID=app;PWD={};",
        "{Rq8;Zx2!Wc9}",
    ),
    Kind(
        "adonet-connection-string",
        "Server=tcp:acme.database.windows.net,1433;Initial Catalog=db;User ID=admin;"
        "Password={};Encrypt=True;",
        "R3dw00d-Falls!",
    ),
    Kind(
        "jdbc-postgres",
        "jdbc:postgresql://db.internal:5432/app?user=app&password={}&ssl=true",
        "Pg!Secure2024",
    ),
    Kind("jdbc-oracle", "url=jdbc:oracle:thin:scott/{}@//db.internal:1521/ORCL", "T1ger2024x"),
    Kind(
        "jdbc-sqlserver",
        "jdbc:sqlserver://db:1433;databaseName=app;user=sa;password={};encrypt=true",
        "Sa!Passw0rd99",
    ),
    Kind("pgpassword", "PGPASSWORD={} psql -h db.internal -U postgres", "pg_Secret_7788"),
    Kind("pgpassword-plain-word", "PGPASSWORD={} pg_dump -h db -U app app", "bluewhalesong"),
    Kind(
        "discord-webhook",
        "curl -X POST https://discord.com/api/webhooks/1187654321098765432/{}",
        "Zx9_kLm2-PqRsT4uVwXy6zAbCdEf8gHiJk0lMnOpQrStUvWxYz1a2B3c4D5e6F7g8H9i0Jk",
    ),
    Kind(
        "teams-webhook",
        "TEAMS_WEBHOOK={}",
        "https://acme.webhook.office.com/webhookb2/3f8a9c1e-2b4d-4e6f-8a0c-1d3e5f7a9b2c"
        "@7c1e3a5b-9d2f-4b6a-8c0e-2f4a6b8c0d1e/IncomingWebhook/5e8b2d7f1a4c9e3b6d0f8a2c5e7b9d1f"
        "/4a6c8e0b-2d4f-4a6c-8e0b-2d4f6a8c0e1f",
    ),
    Kind(
        "teams-workflow-webhook",
        "https://prod-27.westeurope.logic.azure.com:443/workflows/9a8b7c6d5e4f40312a1b2c3d4e5f6a7b"
        "/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun"
        "&sv=1.0&sig={}",
        "Xq2LmN8pRt4VwYz7BcDf1GhJk5LmNpQrStUvWxYz0Ab",
    ),
    Kind(
        "docker-config-auth",
        '{{"auths": {{"https://index.docker.io/v1/": {{"auth": "{}"}}}}}}',
        "ZGVwbG95OkRrci1QYXQtOWY4ZTdkNmMyYg==",
    ),
    Kind(
        "kubeconfig-client-key-data",
        "users:\n- name: admin\n  user:\n    client-certificate-data: LS0tLS1CRUdJTiBDRVJU\n"
        "    client-key-data: {}\n",
        base64.b64encode(
            b"-----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY.encode() + b"\n"
            b"-----END RSA PRIVATE KEY-----\n"
        ).decode(),
    ),
    Kind(
        "kubeconfig-token",
        "users:\n- name: gke_acme_europe-west1_prod\n  user:\n    token: {}\n",
        "ya29.a0AfB_byC1x2Y3z4W5v6U7t8S9r0Q1p2O3n4M5l6K7j8I9h0G",
    ),
    Kind("kubeconfig-bootstrap-token", "    token: {}\n", "k8x2qz.9fj3m5p7r1t4w6y8"),
    Kind(
        "base64-json-neutral-key",
        '{{"data": "{}"}}',
        "eyJ1c2VyIjoic3ZjLWRlcGxveSIsInNlc3Npb24iOiI4ZjNlMmE5MWM0Iiwic2NvcGUiOiJhZG1pbiJ9",
    ),
    Kind(
        "base64-json-with-secret",
        "kubectl get secret app -o jsonpath='{{.data.config}}'\n{}",
        "eyJjbGllbnRfaWQiOiJvcHMtYm90IiwiY2xpZW50X3NlY3JldCI6IjRmOWMyZTdhMWI4ZDNmNmUwYTVjIiwi"
        "ZXhwaXJlcyI6MTc2NzIyNTYwMH0=",
    ),
    Kind("base64-value-neutral-key", 'value: "{}"', "e+HAqfM9EuiktsXX6PkKGyw9Tl9gcYKTpLXG1+j5oLE="),
    Kind(
        "ibm-cloud-iam-key",
        "ibm_cloud_iam_api_key: {}",
        "Zq8Xw2Lm9Np4Rt7Vb1Yc6Hd3Jf5Gs0Ka8Eu2Oi4Pl6Mn",
    ),
    Kind(
        "secret-as-json-key",
        '{{"{}": {{"scopes": ["read"]}}}}',
        "sk-proj-" + "Kk7" * 16 + "T3BlbkFJ" + "z" * 20,
    ),
    # --- the kinds issue 56 found outside gitleaks' default rules --------------------------
    Kind("mysql-p-attached", "mysql -h db -u root -p{} shop < dump.sql", "Vq7rT2xLp9"),
    Kind("mysqldump-p-quoted", "mysqldump -u app -p'{}' shop > shop.sql", "Hw3#nK8!qz"),
    Kind("password-flag-equals", "mongodump --username app --password={} --db shop", "Lr5tY8uWq2"),
    Kind("password-flag-space", "redis-cli --pass {} -h cache ping", "Gm4kZ7xN2p"),
    Kind("sshpass", "sshpass -p '{}' ssh deploy@10.0.0.7 uptime", "Bt6yH3jK9w"),
    Kind("netrc-one-line", "machine api.heroku.com login me@x.io password {}", "Ru8cV2bN5m"),
    Kind("netrc-lines", "machine github.com\n  login octo\n  password {}\n", "Pq3wE6rT9y"),
    Kind("pgpass-line", "$ cat ~/.pgpass\ndb.internal:5432:shop:app:{}", "Yk2mN8vB4x"),
    Kind("my-cnf", "[client]\nuser = root\npassword = {}\n", "Fz9xC3vB7n"),
    Kind("cookie-header", "Cookie: sessionid={}; csrftoken=abc", "q1w2e3r4t5y6u7i8o9p0asdf"),
    Kind(
        "set-cookie-header", "Set-Cookie: _app_session={}; path=/; HttpOnly", "Zx8Cv7Bn6Mq5Wl4Kj3Hg"
    ),
    Kind(
        "curl-cookie", "curl -s -b 'connect.sid={}' https://app.example.com/me", "s%3AkJ8hG7fD6sA5"
    ),
    Kind(
        "aws-presigned-url",
        "https://b.s3.amazonaws.com/a.zip?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={}",
        "3d9f2a7c1e5b8d4f6a0c2e4b6d8f0a1c3e5b7d9f1a2c4e6b8d0f2a4c6e8b0d2f4a",
    ),
    Kind(
        "gcs-signed-url",
        "https://storage.googleapis.com/bk/o.txt?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature={}",
        "7a1b3c5d7e9f0a2b4c6d8e0f1a3b5c7d9e0f2a4b6c8d0e1f3a5b7c9d0e2f4a6b8c",
    ),
    Kind(
        "wallet-hex-private-key",
        "cast send 0xA0b8 'transfer()' --private-key {}",
        "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    ),
    Kind(
        "wallet-seed-phrase",
        'const wallet = Wallet.fromPhrase(mnemonic);\nmnemonic: "{}"',
        "test test test test test test test test test test test junk",
    ),
    Kind(
        "sendgrid-key-in-call",
        "sgMail.setApiKey({}, {{ retries: 2 }})",
        "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",
    ),
    Kind(
        "teams-webhook-upper",
        "curl -X POST -d @card.json {}",
        "https://acme.webhook.office.com/webhookb2/7F3B1A2C-1234-4ABC-9DEF-0123456789AB@"
        "72F988BF-86F1-41AF-91AB-2D7CD011DB47/IncomingWebhook/A1B2C3D4E5F60718293A4B5C6D7E8F90/"
        "9E1C7A52-3F4B-4D2E-8C6A-1B2D3E4F5A6B",
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
    # placeholders in a task about URLs and credentials
    "validate('http://user:pass@example.com')",
    "http://user:password@example.com/path",
    "https://admin:xxx@internal.example.org",
    "ftp://anonymous:<password>@ftp.example.org/pub",
    "postgres://app:${DB_PASSWORD}@db/app",
    "export API_KEY=your-api-key-here",
    "password: <your password>",
    # digests, ids and files under keys that say nothing
    '{"value": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}',
    '"data": "4b825dc642cb6eb9a060e54bf8d69288fbee4904"',
    "value: 123e4567-e89b-12d3-a456-426614174000",
    '{"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB'
    'CAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="}',
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    '"integrity": "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXGOWdZ"',
    "value = compute_value(row)",
    "data: someReadableCamelCaseName",
    # seen in the real logs of ../shared/data
    "usage = Usage(model_name=model_name,\n    input_tokens=input_tokens,\n    output_tokens=ot)",
    "✓ New refresh token: eyJhbGciOiJIUzI1NiIs...",
    # options and hashes beside issue 56's rules
    "mkdir -p build/out && ssh -p 2222 deploy@host",
    "docker run -p 8080:80 nginx; mysql --help",
    "git log --pretty=oneline --password-file ~/.pw",
    "tx 0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d mined",
    "random seed 42 for every run",
    "src/app.py:12:3: E501 line too long",
    "the cookie: a small jar",
    "machine learning login flow",
)

# Values that only look like secrets under the keys of a JSON object: kept as they are.
NOT_SECRET_VALUES: tuple[dict[str, str], ...] = (
    {"data": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
    {"value": "4b825dc642cb6eb9a060e54bf8d69288fbee4904"},
    {"value": "123e4567-e89b-12d3-a456-426614174000"},
    {"data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAA"},
    {"password": "password", "token": "<token>", "api_key": "${API_KEY}"},
    {"key": "Enter", "token_type": "bearer", "secret_name": "db-creds"},
    # a model's encrypted reasoning (OpenRouter's reasoning_details): long ciphertext, no key
    {
        "type": "reasoning.encrypted",
        "data": base64.b64encode(bytes((n * 73 + 41) % 256 for n in range(300))).decode(),
    },
)

# --- one kind per gitleaks rule, drawn from its own expression ----------------------------

_RULES_WITH_LINES = {
    # Rules whose context a drawn match does not give: a line of the shape they look for.
    "kubernetes-secret-yaml": (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: app\ndata:\n  api-token: {}\n",
        "cTdXbTJYazlMcDRSejhUbjNWYjY=",
    ),
    "curl-auth-user": ("curl -u {} https://api.acme.io/v1/builds", "deploy:Xk3q9Zp2Lm"),
}
_PRINTABLE = [chr(c) for c in range(0x21, 0x7F)]
_TEMPLATES = (
    '{keyword}_token = "{secret}"',
    "{KEYWORD}_API_KEY={secret}",
    '"{keyword}_secret": "{secret}"',
    "{secret}",
    "export TOKEN={secret}",
    "found {secret} in the log",
)


def _class_chars(items: list[tuple[Any, Any]], constants: Any) -> list[str]:
    allowed: set[str] = set()
    negate = False
    for op, arg in items:
        if op is constants.NEGATE:
            negate = True
        elif op is constants.LITERAL:
            allowed.add(chr(arg))
        elif op is constants.RANGE:
            allowed |= {chr(c) for c in range(arg[0], arg[1] + 1) if 0x20 <= c < 0x7F}
        elif op is constants.CATEGORY:
            name = str(arg).lower()
            test = {
                "digit": str.isdigit,
                "word": lambda c: c.isalnum() or c == "_",
                "space": str.isspace,
            }[next(k for k in ("digit", "word", "space") if k in name)]
            chars = {c for c in [*_PRINTABLE, " "] if test(c)}
            if "not" in name:
                chars = set(_PRINTABLE) - chars
            allowed |= chars
    if negate:
        allowed = set(_PRINTABLE) - allowed
    return sorted(allowed)


def _draw(items: list[tuple[Any, Any]], rng: random.Random, constants: Any) -> str:
    """A random text the parsed expression matches (most of the time: assertions are not
    drawn, and the caller checks the result)."""
    out: list[str] = []
    for op, arg in items:
        if op is constants.LITERAL:
            out.append(chr(arg))
        elif op is constants.NOT_LITERAL:
            out.append(rng.choice([c for c in "abcdefgh" if c != chr(arg)]))
        elif op is constants.ANY:  # an unescaped dot, in the rules mostly meant as one
            out.append(".")
        elif op is constants.IN:
            chars = _class_chars(list(arg), constants)
            alnum = [c for c in chars if c.isalnum()]
            out.append(rng.choice(alnum if alnum and rng.random() < 0.95 else chars))
        elif op is constants.BRANCH:
            out.append(_draw(list(rng.choice(arg[1])), rng, constants))
        elif op is constants.SUBPATTERN:
            out.append(_draw(list(arg[3]), rng, constants))
        elif op in (constants.MAX_REPEAT, constants.MIN_REPEAT, constants.POSSESSIVE_REPEAT):
            low, high, sub = arg
            high = low + 40 if high == constants.MAXREPEAT else high
            count = low if high - low <= 5 else rng.randint(low, min(high, max(low, 40)))
            if [op for op, _ in sub] == [constants.ANY]:  # `.{8,}`: any text, not dots
                out += rng.choices("abcdefghijkmnopqrstuvwxyz23456789ABCDEFGH", k=count)
            else:
                out += [_draw(list(sub), rng, constants) for _ in range(count)]
    return "".join(out)


def _secret_items(parsed: list[tuple[Any, Any]], group: int, constants: Any) -> Any:
    """The parsed items of capture group `group` (0: the first one met), or None."""
    for op, arg in parsed:
        if op is constants.SUBPATTERN and (arg[0] == group or (group == 0 and arg[0])):
            return list(arg[3])
        children: list[list[tuple[Any, Any]]] = []
        if op is constants.SUBPATTERN:
            children = [list(arg[3])]
        elif op is constants.BRANCH:
            children = [list(b) for b in arg[1][:1]]
        elif op in (constants.MAX_REPEAT, constants.MIN_REPEAT):
            children = [list(arg[2])]
        for child in children:
            found = _secret_items(child, group, constants)
            if found is not None:
                return found
    return None


@cache
def gitleaks_kinds() -> tuple[tuple[Kind, ...], tuple[str, ...]]:
    """A kind per gitleaks rule (named `gitleaks:<id>`), and the ids of the rules for which
    no drawn value was caught by the rule itself (each a test failure)."""
    from wikitrace.compiler import gitleaks
    from wikitrace.compiler.redact import found_by

    constants: Any = importlib.import_module("re._constants")
    parser: Any = importlib.import_module("re._parser")
    kinds: list[Kind] = []
    failed: list[str] = []
    for rule in gitleaks.default_config().rules:
        parsed = list(parser.parse(gitleaks.translate(rule.regex), 0).data)
        rng = random.Random(rule.id)
        keyword = next((k for k in rule.keywords if k.isidentifier()), rule.id.split("-")[0])
        kind = None
        for _ in range(40):
            whole = _draw(parsed, rng, constants)
            items = _secret_items(parsed, rule.secret_group, constants)
            secret = _draw(items, rng, constants) if items is not None else whole
            lines = [
                t.format(keyword=keyword, KEYWORD=keyword.upper(), secret=secret)
                for t in _TEMPLATES
            ]
            if rule.id in _RULES_WITH_LINES:
                lines.insert(0, _RULES_WITH_LINES[rule.id][0].format(_RULES_WITH_LINES[rule.id][1]))
            lines.append(whole)
            for line in lines:
                caught = found_by(rule.id, line)
                if caught:
                    piece = caught[0]
                    escaped = line.replace("{", "{{").replace("}", "}}")
                    at = escaped.find(piece.replace("{", "{{").replace("}", "}}"))
                    template = (
                        escaped[:at]
                        + "{}"
                        + escaped[at + len(piece.replace("{", "{{").replace("}", "}}")) :]
                    )
                    kind = Kind(f"gitleaks:{rule.id}", template, piece)
                    break
            if kind is not None:
                break
        if kind is None:
            failed.append(rule.id)
        else:
            kinds.append(kind)
    return tuple(kinds), tuple(failed)
