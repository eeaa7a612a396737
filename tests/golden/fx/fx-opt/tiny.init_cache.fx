def forward(self, src, memory):
    padding_mask = attncomp_lower_ops_padding_mask(src, 0);  src = None
    size = memory.size(0)
    new_zeros = memory.new_zeros((size, 4, 0, 16))
    new_zeros_1 = memory.new_zeros((size, 4, 0, 16))
    decoder_layers_0_cross_attn_k_proj_weight = getattr(self.decoder.layers, "0").cross_attn.k_proj.weight
    decoder_layers_0_cross_attn_v_proj_weight = getattr(self.decoder.layers, "0").cross_attn.v_proj.weight
    cat = torch.cat((decoder_layers_0_cross_attn_k_proj_weight, decoder_layers_0_cross_attn_v_proj_weight));  decoder_layers_0_cross_attn_k_proj_weight = decoder_layers_0_cross_attn_v_proj_weight = None
    linear = torch._C._nn.linear(memory, cat, None);  cat = None
    split = torch.functional.split(linear, (64, 64), -1);  linear = None
    getitem = split[0]
    getitem_1 = split[1];  split = None
    unflatten = torch.unflatten(getitem, -1, (4, 16));  getitem = None
    transpose = torch.transpose(unflatten, 1, 2);  unflatten = None
    unflatten_1 = torch.unflatten(getitem_1, -1, (4, 16));  getitem_1 = None
    transpose_1 = torch.transpose(unflatten_1, 1, 2);  unflatten_1 = None
    new_zeros_2 = memory.new_zeros((size, 4, 0, 16))
    new_zeros_3 = memory.new_zeros((size, 4, 0, 16));  size = None
    decoder_layers_1_cross_attn_k_proj_weight = getattr(self.decoder.layers, "1").cross_attn.k_proj.weight
    decoder_layers_1_cross_attn_v_proj_weight = getattr(self.decoder.layers, "1").cross_attn.v_proj.weight
    cat_1 = torch.cat((decoder_layers_1_cross_attn_k_proj_weight, decoder_layers_1_cross_attn_v_proj_weight));  decoder_layers_1_cross_attn_k_proj_weight = decoder_layers_1_cross_attn_v_proj_weight = None
    linear_1 = torch._C._nn.linear(memory, cat_1, None);  memory = cat_1 = None
    split_1 = torch.functional.split(linear_1, (64, 64), -1);  linear_1 = None
    getitem_2 = split_1[0]
    getitem_3 = split_1[1];  split_1 = None
    unflatten_2 = torch.unflatten(getitem_2, -1, (4, 16));  getitem_2 = None
    transpose_2 = torch.transpose(unflatten_2, 1, 2);  unflatten_2 = None
    unflatten_3 = torch.unflatten(getitem_3, -1, (4, 16));  getitem_3 = None
    transpose_3 = torch.transpose(unflatten_3, 1, 2);  unflatten_3 = None
    return (padding_mask, new_zeros, new_zeros_1, transpose, transpose_1, new_zeros_2, new_zeros_3, transpose_2, transpose_3)
    