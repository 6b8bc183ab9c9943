"""The former name of ``rotate_encryption_keys``, kept for the scripts that use it:
it re-encrypts every encrypted column, not only users' keys."""

from credentials.management.commands.rotate_encryption_keys import Command as RotateEncryptionKeys


class Command(RotateEncryptionKeys):
    help = "Alias of rotate_encryption_keys: " + RotateEncryptionKeys.help
