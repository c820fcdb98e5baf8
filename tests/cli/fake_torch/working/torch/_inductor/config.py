force_disable_caches = False
