def forward(self, src, memory):
    padding_mask = attncomp_lower_ops_padding_mask(src, 0);  src = None
    size = memory.size(0)
    new_zeros = memory.new_zeros((size, 4, 0, 16))
    new_zeros_1 = memory.new_zeros((size, 4, 0, 16))
    decoder_layers_0_cross_attn_k_proj = getattr(self.decoder.layers, "0").cross_attn.k_proj(memory)
    unflatten = torch.unflatten(decoder_layers_0_cross_attn_k_proj, -1, (4, 16));  decoder_layers_0_cross_attn_k_proj = None
    transpose = torch.transpose(unflatten, 1, 2);  unflatten = None
    decoder_layers_0_cross_attn_v_proj = getattr(self.decoder.layers, "0").cross_attn.v_proj(memory)
    unflatten_1 = torch.unflatten(decoder_layers_0_cross_attn_v_proj, -1, (4, 16));  decoder_layers_0_cross_attn_v_proj = None
    transpose_1 = torch.transpose(unflatten_1, 1, 2);  unflatten_1 = None
    new_zeros_2 = memory.new_zeros((size, 4, 0, 16))
    new_zeros_3 = memory.new_zeros((size, 4, 0, 16));  size = None
    decoder_layers_1_cross_attn_k_proj = getattr(self.decoder.layers, "1").cross_attn.k_proj(memory)
    unflatten_2 = torch.unflatten(decoder_layers_1_cross_attn_k_proj, -1, (4, 16));  decoder_layers_1_cross_attn_k_proj = None
    transpose_2 = torch.transpose(unflatten_2, 1, 2);  unflatten_2 = None
    decoder_layers_1_cross_attn_v_proj = getattr(self.decoder.layers, "1").cross_attn.v_proj(memory);  memory = None
    unflatten_3 = torch.unflatten(decoder_layers_1_cross_attn_v_proj, -1, (4, 16));  decoder_layers_1_cross_attn_v_proj = None
    transpose_3 = torch.transpose(unflatten_3, 1, 2);  unflatten_3 = None
    return (padding_mask, new_zeros, new_zeros_1, transpose, transpose_1, new_zeros_2, new_zeros_3, transpose_2, transpose_3)
    