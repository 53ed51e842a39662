#!/usr/bin/env python3
"""smtp_recorder.py - a loopback SMTP server (aiosmtpd) for the action
tests. Records every message as one JSON line: envelope sender, recipients,
the message text and whether the session authenticated. With --user and
--password it offers AUTH (PLAIN/LOGIN, without TLS on loopback) and
accepts only that pair.

Usage: smtp_recorder.py --port-file F --log F [--user U --password P]
"""
import argparse
import asyncio
import json
import os

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--user")
    ap.add_argument("--password")
    args = ap.parse_args()
    log = open(args.log, "a", buffering=1)

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            log.write(json.dumps({
                "mail_from": envelope.mail_from,
                "rcpt_tos": envelope.rcpt_tos,
                "data": envelope.content.decode("utf-8", "replace"),
                "authenticated": bool(session.authenticated),
            }) + "\n")
            return "250 OK"

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = (isinstance(auth_data, LoginPassword)
              and auth_data.login.decode() == args.user
              and auth_data.password.decode() == args.password)
        return AuthResult(success=ok)

    def factory():
        if args.user:
            return SMTP(Handler(), authenticator=authenticator,
                        auth_require_tls=False)
        return SMTP(Handler())

    loop = asyncio.new_event_loop()
    srv = loop.run_until_complete(loop.create_server(factory, "127.0.0.1", 0))
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(srv.sockets[0].getsockname()[1]))
    os.rename(args.port_file + ".tmp", args.port_file)
    loop.run_forever()


if __name__ == "__main__":
    main()
