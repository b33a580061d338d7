"""The store: the only room that speaks SQL (schema, migrations, records, takes, ratings,
listening tests, the arena)."""
