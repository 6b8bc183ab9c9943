"""The ops app's statements."""

# The readiness check's question to the database: answered only by a live server on a
# working connection, and by both databases.
DATABASE_ANSWERS = "SELECT 1"
