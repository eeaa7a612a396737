def forward(self, tokens, cache):
    getitem = cache[1]
    size = getitem.size(2);  getitem = None
    embed = self.embed(tokens)
    mul = torch.mul(embed, 8.0);  embed = None
    size_1 = tokens.size(1);  tokens = None
    getattr_1 = mul.device
    add = size + size_1;  size_1 = None
    arange = torch.arange(size, add, device = getattr_1);  size = add = getattr_1 = None
    getattr_2 = mul.dtype
    sinusoidal = attncomp_lower_ops_sinusoidal(arange, 64, getattr_2);  arange = getattr_2 = None
    add_1 = torch.add(mul, sinusoidal);  mul = sinusoidal = None
    getitem_1 = cache[0]
    logical_not = torch.logical_not(getitem_1)
    getitem_2 = cache[1]
    getitem_3 = cache[2]
    decoder_layers_0_self_attn_q_proj_weight = getattr(self.decoder.layers, "0").self_attn.q_proj.weight
    decoder_layers_0_self_attn_k_proj_weight = getattr(self.decoder.layers, "0").self_attn.k_proj.weight
    decoder_layers_0_self_attn_v_proj_weight = getattr(self.decoder.layers, "0").self_attn.v_proj.weight
    cat_4 = torch.cat((decoder_layers_0_self_attn_q_proj_weight, decoder_layers_0_self_attn_k_proj_weight, decoder_layers_0_self_attn_v_proj_weight));  decoder_layers_0_self_attn_q_proj_weight = decoder_layers_0_self_attn_k_proj_weight = decoder_layers_0_self_attn_v_proj_weight = None
    linear_1 = torch._C._nn.linear(add_1, cat_4, None);  cat_4 = None
    split = torch.functional.split(linear_1, (64, 64, 64), -1);  linear_1 = None
    getitem_10 = split[0]
    getitem_11 = split[1]
    getitem_12 = split[2];  split = None
    unflatten = torch.unflatten(getitem_11, -1, (4, 16));  getitem_11 = None
    transpose = torch.transpose(unflatten, 1, 2);  unflatten = None
    unflatten_1 = torch.unflatten(getitem_12, -1, (4, 16));  getitem_12 = None
    transpose_1 = torch.transpose(unflatten_1, 1, 2);  unflatten_1 = None
    cat = torch.cat((getitem_2, transpose), 2);  getitem_2 = transpose = None
    cat_1 = torch.cat((getitem_3, transpose_1), 2);  getitem_3 = transpose_1 = None
    unflatten_2 = torch.unflatten(getitem_10, -1, (4, 16));  getitem_10 = None
    transpose_2 = torch.transpose(unflatten_2, 1, 2);  unflatten_2 = None
    scaled_dot_product_attention = torch._C._nn.scaled_dot_product_attention(transpose_2, cat, cat_1, scale = 0.25);  transpose_2 = None
    transpose_4 = torch.transpose(scaled_dot_product_attention, 1, 2);  scaled_dot_product_attention = None
    flatten = torch.flatten(transpose_4, -2);  transpose_4 = None
    decoder_layers_0_self_attn_o_proj = getattr(self.decoder.layers, "0").self_attn.o_proj(flatten);  flatten = None
    add_2 = torch.add(add_1, decoder_layers_0_self_attn_o_proj);  add_1 = decoder_layers_0_self_attn_o_proj = None
    decoder_layers_0_self_attn_norm = getattr(self.decoder.layers, "0").self_attn_norm(add_2);  add_2 = None
    getitem_4 = cache[3]
    getitem_5 = cache[4]
    decoder_layers_0_cross_attn_q_proj = getattr(self.decoder.layers, "0").cross_attn.q_proj(decoder_layers_0_self_attn_norm)
    unflatten_3 = torch.unflatten(decoder_layers_0_cross_attn_q_proj, -1, (4, 16));  decoder_layers_0_cross_attn_q_proj = None
    transpose_5 = torch.transpose(unflatten_3, 1, 2);  unflatten_3 = None
    scaled_dot_product_attention_1 = torch._C._nn.scaled_dot_product_attention(transpose_5, getitem_4, getitem_5, scale = 0.25, attn_mask = logical_not);  transpose_5 = None
    transpose_7 = torch.transpose(scaled_dot_product_attention_1, 1, 2);  scaled_dot_product_attention_1 = None
    flatten_1 = torch.flatten(transpose_7, -2);  transpose_7 = None
    decoder_layers_0_cross_attn_o_proj = getattr(self.decoder.layers, "0").cross_attn.o_proj(flatten_1);  flatten_1 = None
    add_3 = torch.add(decoder_layers_0_self_attn_norm, decoder_layers_0_cross_attn_o_proj);  decoder_layers_0_self_attn_norm = decoder_layers_0_cross_attn_o_proj = None
    decoder_layers_0_cross_attn_norm = getattr(self.decoder.layers, "0").cross_attn_norm(add_3);  add_3 = None
    decoder_layers_0_ffn_fc1 = getattr(self.decoder.layers, "0").ffn.fc1(decoder_layers_0_cross_attn_norm)
    relu = torch.relu(decoder_layers_0_ffn_fc1);  decoder_layers_0_ffn_fc1 = None
    decoder_layers_0_ffn_fc2 = getattr(self.decoder.layers, "0").ffn.fc2(relu);  relu = None
    add_4 = torch.add(decoder_layers_0_cross_attn_norm, decoder_layers_0_ffn_fc2);  decoder_layers_0_cross_attn_norm = decoder_layers_0_ffn_fc2 = None
    decoder_layers_0_ffn_norm = getattr(self.decoder.layers, "0").ffn_norm(add_4);  add_4 = None
    getitem_6 = cache[5]
    getitem_7 = cache[6]
    decoder_layers_1_self_attn_q_proj_weight = getattr(self.decoder.layers, "1").self_attn.q_proj.weight
    decoder_layers_1_self_attn_k_proj_weight = getattr(self.decoder.layers, "1").self_attn.k_proj.weight
    decoder_layers_1_self_attn_v_proj_weight = getattr(self.decoder.layers, "1").self_attn.v_proj.weight
    cat_5 = torch.cat((decoder_layers_1_self_attn_q_proj_weight, decoder_layers_1_self_attn_k_proj_weight, decoder_layers_1_self_attn_v_proj_weight));  decoder_layers_1_self_attn_q_proj_weight = decoder_layers_1_self_attn_k_proj_weight = decoder_layers_1_self_attn_v_proj_weight = None
    linear_2 = torch._C._nn.linear(decoder_layers_0_ffn_norm, cat_5, None);  cat_5 = None
    split_1 = torch.functional.split(linear_2, (64, 64, 64), -1);  linear_2 = None
    getitem_13 = split_1[0]
    getitem_14 = split_1[1]
    getitem_15 = split_1[2];  split_1 = None
    unflatten_4 = torch.unflatten(getitem_14, -1, (4, 16));  getitem_14 = None
    transpose_8 = torch.transpose(unflatten_4, 1, 2);  unflatten_4 = None
    unflatten_5 = torch.unflatten(getitem_15, -1, (4, 16));  getitem_15 = None
    transpose_9 = torch.transpose(unflatten_5, 1, 2);  unflatten_5 = None
    cat_2 = torch.cat((getitem_6, transpose_8), 2);  getitem_6 = transpose_8 = None
    cat_3 = torch.cat((getitem_7, transpose_9), 2);  getitem_7 = transpose_9 = None
    unflatten_6 = torch.unflatten(getitem_13, -1, (4, 16));  getitem_13 = None
    transpose_10 = torch.transpose(unflatten_6, 1, 2);  unflatten_6 = None
    scaled_dot_product_attention_2 = torch._C._nn.scaled_dot_product_attention(transpose_10, cat_2, cat_3, scale = 0.25);  transpose_10 = None
    transpose_12 = torch.transpose(scaled_dot_product_attention_2, 1, 2);  scaled_dot_product_attention_2 = None
    flatten_2 = torch.flatten(transpose_12, -2);  transpose_12 = None
    decoder_layers_1_self_attn_o_proj = getattr(self.decoder.layers, "1").self_attn.o_proj(flatten_2);  flatten_2 = None
    add_5 = torch.add(decoder_layers_0_ffn_norm, decoder_layers_1_self_attn_o_proj);  decoder_layers_0_ffn_norm = decoder_layers_1_self_attn_o_proj = None
    decoder_layers_1_self_attn_norm = getattr(self.decoder.layers, "1").self_attn_norm(add_5);  add_5 = None
    getitem_8 = cache[7]
    getitem_9 = cache[8];  cache = None
    decoder_layers_1_cross_attn_q_proj = getattr(self.decoder.layers, "1").cross_attn.q_proj(decoder_layers_1_self_attn_norm)
    unflatten_7 = torch.unflatten(decoder_layers_1_cross_attn_q_proj, -1, (4, 16));  decoder_layers_1_cross_attn_q_proj = None
    transpose_13 = torch.transpose(unflatten_7, 1, 2);  unflatten_7 = None
    scaled_dot_product_attention_3 = torch._C._nn.scaled_dot_product_attention(transpose_13, getitem_8, getitem_9, scale = 0.25, attn_mask = logical_not);  transpose_13 = logical_not = None
    transpose_15 = torch.transpose(scaled_dot_product_attention_3, 1, 2);  scaled_dot_product_attention_3 = None
    flatten_3 = torch.flatten(transpose_15, -2);  transpose_15 = None
    decoder_layers_1_cross_attn_o_proj = getattr(self.decoder.layers, "1").cross_attn.o_proj(flatten_3);  flatten_3 = None
    add_6 = torch.add(decoder_layers_1_self_attn_norm, decoder_layers_1_cross_attn_o_proj);  decoder_layers_1_self_attn_norm = decoder_layers_1_cross_attn_o_proj = None
    decoder_layers_1_cross_attn_norm = getattr(self.decoder.layers, "1").cross_attn_norm(add_6);  add_6 = None
    decoder_layers_1_ffn_fc1 = getattr(self.decoder.layers, "1").ffn.fc1(decoder_layers_1_cross_attn_norm)
    relu_1 = torch.relu(decoder_layers_1_ffn_fc1);  decoder_layers_1_ffn_fc1 = None
    decoder_layers_1_ffn_fc2 = getattr(self.decoder.layers, "1").ffn.fc2(relu_1);  relu_1 = None
    add_7 = torch.add(decoder_layers_1_cross_attn_norm, decoder_layers_1_ffn_fc2);  decoder_layers_1_cross_attn_norm = decoder_layers_1_ffn_fc2 = None
    decoder_layers_1_ffn_norm = getattr(self.decoder.layers, "1").ffn_norm(add_7);  add_7 = None
    select = torch.select(decoder_layers_1_ffn_norm, 1, -1);  decoder_layers_1_ffn_norm = None
    embed_weight = self.embed.weight
    linear = torch._C._nn.linear(select, embed_weight);  select = embed_weight = None
    return (linear, (getitem_1, cat, cat_1, getitem_4, getitem_5, cat_2, cat_3, getitem_8, getitem_9))
    