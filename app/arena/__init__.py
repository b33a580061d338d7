"""The open arena: blind battles between two systems, votes, and the Bradley–Terry board
(``/arena``, its ``/ll/arena/...`` routes and ``/ll/ws`` messages, and ``/admin/arena``)."""
