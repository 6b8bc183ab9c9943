"""The push senders: APNs (``apns``), FCM (``fcm``), the push sender that picks one
per device and registers with the outbox (``push``). Webhooks' sender goes beside them."""
