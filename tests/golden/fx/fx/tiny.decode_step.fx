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
    fully_masked_rows = attncomp_lower_ops_fully_masked_rows(getitem_1)
    getitem_2 = cache[1]
    getitem_3 = cache[2]
    decoder_layers_0_self_attn_k_proj = getattr(self.decoder.layers, "0").self_attn.k_proj(add_1)
    unflatten = torch.unflatten(decoder_layers_0_self_attn_k_proj, -1, (4, 16));  decoder_layers_0_self_attn_k_proj = None
    transpose = torch.transpose(unflatten, 1, 2);  unflatten = None
    decoder_layers_0_self_attn_v_proj = getattr(self.decoder.layers, "0").self_attn.v_proj(add_1)
    unflatten_1 = torch.unflatten(decoder_layers_0_self_attn_v_proj, -1, (4, 16));  decoder_layers_0_self_attn_v_proj = None
    transpose_1 = torch.transpose(unflatten_1, 1, 2);  unflatten_1 = None
    cat = torch.cat((getitem_2, transpose), 2);  getitem_2 = transpose = None
    cat_1 = torch.cat((getitem_3, transpose_1), 2);  getitem_3 = transpose_1 = None
    decoder_layers_0_self_attn_q_proj = getattr(self.decoder.layers, "0").self_attn.q_proj(add_1)
    unflatten_2 = torch.unflatten(decoder_layers_0_self_attn_q_proj, -1, (4, 16));  decoder_layers_0_self_attn_q_proj = None
    transpose_2 = torch.transpose(unflatten_2, 1, 2);  unflatten_2 = None
    transpose_3 = torch.transpose(cat, -2, -1)
    matmul = torch.matmul(transpose_2, transpose_3);  transpose_2 = transpose_3 = None
    mul_1 = torch.mul(matmul, 0.25);  matmul = None
    softmax = torch.softmax(mul_1, -1);  mul_1 = None
    matmul_1 = torch.matmul(softmax, cat_1);  softmax = None
    transpose_4 = torch.transpose(matmul_1, 1, 2);  matmul_1 = None
    flatten = torch.flatten(transpose_4, -2);  transpose_4 = None
    decoder_layers_0_self_attn_o_proj = getattr(self.decoder.layers, "0").self_attn.o_proj(flatten);  flatten = None
    add_2 = torch.add(add_1, decoder_layers_0_self_attn_o_proj);  add_1 = decoder_layers_0_self_attn_o_proj = None
    decoder_layers_0_self_attn_norm = getattr(self.decoder.layers, "0").self_attn_norm(add_2);  add_2 = None
    getitem_4 = cache[3]
    getitem_5 = cache[4]
    decoder_layers_0_cross_attn_q_proj = getattr(self.decoder.layers, "0").cross_attn.q_proj(decoder_layers_0_self_attn_norm)
    unflatten_3 = torch.unflatten(decoder_layers_0_cross_attn_q_proj, -1, (4, 16));  decoder_layers_0_cross_attn_q_proj = None
    transpose_5 = torch.transpose(unflatten_3, 1, 2);  unflatten_3 = None
    transpose_6 = torch.transpose(getitem_4, -2, -1)
    matmul_2 = torch.matmul(transpose_5, transpose_6);  transpose_5 = transpose_6 = None
    mul_2 = torch.mul(matmul_2, 0.25);  matmul_2 = None
    masked_fill = torch.masked_fill(mul_2, getitem_1, -inf);  mul_2 = None
    softmax_1 = torch.softmax(masked_fill, -1);  masked_fill = None
    masked_fill_1 = torch.masked_fill(softmax_1, fully_masked_rows, 0.0);  softmax_1 = None
    matmul_3 = torch.matmul(masked_fill_1, getitem_5);  masked_fill_1 = None
    transpose_7 = torch.transpose(matmul_3, 1, 2);  matmul_3 = None
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
    decoder_layers_1_self_attn_k_proj = getattr(self.decoder.layers, "1").self_attn.k_proj(decoder_layers_0_ffn_norm)
    unflatten_4 = torch.unflatten(decoder_layers_1_self_attn_k_proj, -1, (4, 16));  decoder_layers_1_self_attn_k_proj = None
    transpose_8 = torch.transpose(unflatten_4, 1, 2);  unflatten_4 = None
    decoder_layers_1_self_attn_v_proj = getattr(self.decoder.layers, "1").self_attn.v_proj(decoder_layers_0_ffn_norm)
    unflatten_5 = torch.unflatten(decoder_layers_1_self_attn_v_proj, -1, (4, 16));  decoder_layers_1_self_attn_v_proj = None
    transpose_9 = torch.transpose(unflatten_5, 1, 2);  unflatten_5 = None
    cat_2 = torch.cat((getitem_6, transpose_8), 2);  getitem_6 = transpose_8 = None
    cat_3 = torch.cat((getitem_7, transpose_9), 2);  getitem_7 = transpose_9 = None
    decoder_layers_1_self_attn_q_proj = getattr(self.decoder.layers, "1").self_attn.q_proj(decoder_layers_0_ffn_norm)
    unflatten_6 = torch.unflatten(decoder_layers_1_self_attn_q_proj, -1, (4, 16));  decoder_layers_1_self_attn_q_proj = None
    transpose_10 = torch.transpose(unflatten_6, 1, 2);  unflatten_6 = None
    transpose_11 = torch.transpose(cat_2, -2, -1)
    matmul_4 = torch.matmul(transpose_10, transpose_11);  transpose_10 = transpose_11 = None
    mul_3 = torch.mul(matmul_4, 0.25);  matmul_4 = None
    softmax_2 = torch.softmax(mul_3, -1);  mul_3 = None
    matmul_5 = torch.matmul(softmax_2, cat_3);  softmax_2 = None
    transpose_12 = torch.transpose(matmul_5, 1, 2);  matmul_5 = None
    flatten_2 = torch.flatten(transpose_12, -2);  transpose_12 = None
    decoder_layers_1_self_attn_o_proj = getattr(self.decoder.layers, "1").self_attn.o_proj(flatten_2);  flatten_2 = None
    add_5 = torch.add(decoder_layers_0_ffn_norm, decoder_layers_1_self_attn_o_proj);  decoder_layers_0_ffn_norm = decoder_layers_1_self_attn_o_proj = None
    decoder_layers_1_self_attn_norm = getattr(self.decoder.layers, "1").self_attn_norm(add_5);  add_5 = None
    getitem_8 = cache[7]
    getitem_9 = cache[8];  cache = None
    decoder_layers_1_cross_attn_q_proj = getattr(self.decoder.layers, "1").cross_attn.q_proj(decoder_layers_1_self_attn_norm)
    unflatten_7 = torch.unflatten(decoder_layers_1_cross_attn_q_proj, -1, (4, 16));  decoder_layers_1_cross_attn_q_proj = None
    transpose_13 = torch.transpose(unflatten_7, 1, 2);  unflatten_7 = None
    transpose_14 = torch.transpose(getitem_8, -2, -1)
    matmul_6 = torch.matmul(transpose_13, transpose_14);  transpose_13 = transpose_14 = None
    mul_4 = torch.mul(matmul_6, 0.25);  matmul_6 = None
    masked_fill_2 = torch.masked_fill(mul_4, getitem_1, -inf);  mul_4 = None
    softmax_3 = torch.softmax(masked_fill_2, -1);  masked_fill_2 = None
    masked_fill_3 = torch.masked_fill(softmax_3, fully_masked_rows, 0.0);  softmax_3 = fully_masked_rows = None
    matmul_7 = torch.matmul(masked_fill_3, getitem_9);  masked_fill_3 = None
    transpose_15 = torch.transpose(matmul_7, 1, 2);  matmul_7 = None
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
    