"""The accounts app's statements, each written out whole with named parameters."""

# The user a token names (``public_id``) with their account, in the models' column
# order (``config.sql.from_row`` reads them so: the user's first, then the account's).
# Every authenticated request runs it: compiling the same ORM query each time cost
# more than the rest of the lookup. Both databases run it.
USER_WITH_ACCOUNT = """SELECT u.id, u.password, u.last_login, u.is_superuser, u.username, u.first_name, u.last_name,
    u.email, u.is_staff, u.is_active, u.date_joined,
    a.user_id, a.public_id, a.created_at, a.username_key, a.token_generation, a.revoked_families
FROM auth_user u JOIN accounts_account a ON a.user_id = u.id
WHERE a.public_id = %(public_id)s"""
