SELECT key, value FROM opsq.settings
