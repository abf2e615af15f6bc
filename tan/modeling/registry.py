from ..utils.registry import Registry

# MODEL.ARCHITECTURE names an entry here; each entry is called with the config.
META_ARCH_REGISTRY = Registry("meta-architecture (MODEL.ARCHITECTURE)")
