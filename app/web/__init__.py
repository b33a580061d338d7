"""Web plumbing every room uses: hosts and origins, proxies and TLS, rate limits, visitor
identity and cookies, the admin rule, the WebSocket outbox, trailing slashes, backend queues.

Why one room: a public Space must get each of these right once, for the Playground, the
listening tests, the arena and ``listenlab api`` alike.
"""
