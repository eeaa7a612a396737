def forward(self, memory):
    batch = memory.size(0)
    self_attn = self.self_attn
    empty_cache = self_attn.empty_cache(memory, batch);  self_attn = batch = None
    k = empty_cache[0]
    v = empty_cache[1];  empty_cache = None
    self_kv = attncomp_lower_cache_KV(k, v);  k = v = None
    cross_attn = self.cross_attn
    kv = cross_attn.kv(memory);  cross_attn = memory = None
    k_1 = kv[0]
    v_1 = kv[1];  kv = None
    cross_kv = attncomp_lower_cache_KV(k_1, v_1);  k_1 = v_1 = None
    cache = attncomp_lower_cache_LayerCache(self_kv, cross_kv);  self_kv = cross_kv = None
    return cache
    