def forward(self, src, tgt_in):
    embed = self.embed(src)
    mul = torch.mul(embed, 8.0);  embed = None
    size = src.size(1);  src = None
    getattr_1 = mul.device
    arange = torch.arange(0, size, device = getattr_1);  size = getattr_1 = None
    getattr_2 = mul.dtype
    sinusoidal = attncomp_lower_ops_sinusoidal(arange, 64, getattr_2);  arange = getattr_2 = None
    add = torch.add(mul, sinusoidal);  mul = sinusoidal = None
    encoder_layers_0_self_attn_q_proj_weight = getattr(self.encoder.layers, "0").self_attn.q_proj.weight
    encoder_layers_0_self_attn_k_proj_weight = getattr(self.encoder.layers, "0").self_attn.k_proj.weight
    encoder_layers_0_self_attn_v_proj_weight = getattr(self.encoder.layers, "0").self_attn.v_proj.weight
    cat = torch.cat((encoder_layers_0_self_attn_q_proj_weight, encoder_layers_0_self_attn_k_proj_weight, encoder_layers_0_self_attn_v_proj_weight));  encoder_layers_0_self_attn_q_proj_weight = encoder_layers_0_self_attn_k_proj_weight = encoder_layers_0_self_attn_v_proj_weight = None
    linear = torch._C._nn.linear(add, cat, None);  cat = None
    split = torch.functional.split(linear, (64, 64, 64), -1);  linear = None
    getitem = split[0]
    getitem_1 = split[1]
    getitem_2 = split[2];  split = None
    unflatten = torch.unflatten(getitem_1, -1, (4, 16));  getitem_1 = None
    transpose = torch.transpose(unflatten, 1, 2);  unflatten = None
    unflatten_1 = torch.unflatten(getitem_2, -1, (4, 16));  getitem_2 = None
    transpose_1 = torch.transpose(unflatten_1, 1, 2);  unflatten_1 = None
    unflatten_2 = torch.unflatten(getitem, -1, (4, 16));  getitem = None
    transpose_2 = torch.transpose(unflatten_2, 1, 2);  unflatten_2 = None
    scaled_dot_product_attention = torch._C._nn.scaled_dot_product_attention(transpose_2, transpose, transpose_1, scale = 0.25);  transpose_2 = transpose = transpose_1 = None
    transpose_4 = torch.transpose(scaled_dot_product_attention, 1, 2);  scaled_dot_product_attention = None
    flatten = torch.flatten(transpose_4, -2);  transpose_4 = None
    encoder_layers_0_self_attn_o_proj = getattr(self.encoder.layers, "0").self_attn.o_proj(flatten);  flatten = None
    add_1 = torch.add(add, encoder_layers_0_self_attn_o_proj);  add = encoder_layers_0_self_attn_o_proj = None
    encoder_layers_0_self_attn_norm = getattr(self.encoder.layers, "0").self_attn_norm(add_1);  add_1 = None
    encoder_layers_0_ffn_fc1 = getattr(self.encoder.layers, "0").ffn.fc1(encoder_layers_0_self_attn_norm)
    relu = torch.relu(encoder_layers_0_ffn_fc1);  encoder_layers_0_ffn_fc1 = None
    encoder_layers_0_ffn_fc2 = getattr(self.encoder.layers, "0").ffn.fc2(relu);  relu = None
    add_2 = torch.add(encoder_layers_0_self_attn_norm, encoder_layers_0_ffn_fc2);  encoder_layers_0_self_attn_norm = encoder_layers_0_ffn_fc2 = None
    encoder_layers_0_ffn_norm = getattr(self.encoder.layers, "0").ffn_norm(add_2);  add_2 = None
    encoder_layers_1_self_attn_q_proj_weight = getattr(self.encoder.layers, "1").self_attn.q_proj.weight
    encoder_layers_1_self_attn_k_proj_weight = getattr(self.encoder.layers, "1").self_attn.k_proj.weight
    encoder_layers_1_self_attn_v_proj_weight = getattr(self.encoder.layers, "1").self_attn.v_proj.weight
    cat_1 = torch.cat((encoder_layers_1_self_attn_q_proj_weight, encoder_layers_1_self_attn_k_proj_weight, encoder_layers_1_self_attn_v_proj_weight));  encoder_layers_1_self_attn_q_proj_weight = encoder_layers_1_self_attn_k_proj_weight = encoder_layers_1_self_attn_v_proj_weight = None
    linear_1 = torch._C._nn.linear(encoder_layers_0_ffn_norm, cat_1, None);  cat_1 = None
    split_1 = torch.functional.split(linear_1, (64, 64, 64), -1);  linear_1 = None
    getitem_3 = split_1[0]
    getitem_4 = split_1[1]
    getitem_5 = split_1[2];  split_1 = None
    unflatten_3 = torch.unflatten(getitem_4, -1, (4, 16));  getitem_4 = None
    transpose_5 = torch.transpose(unflatten_3, 1, 2);  unflatten_3 = None
    unflatten_4 = torch.unflatten(getitem_5, -1, (4, 16));  getitem_5 = None
    transpose_6 = torch.transpose(unflatten_4, 1, 2);  unflatten_4 = None
    unflatten_5 = torch.unflatten(getitem_3, -1, (4, 16));  getitem_3 = None
    transpose_7 = torch.transpose(unflatten_5, 1, 2);  unflatten_5 = None
    scaled_dot_product_attention_1 = torch._C._nn.scaled_dot_product_attention(transpose_7, transpose_5, transpose_6, scale = 0.25);  transpose_7 = transpose_5 = transpose_6 = None
    transpose_9 = torch.transpose(scaled_dot_product_attention_1, 1, 2);  scaled_dot_product_attention_1 = None
    flatten_1 = torch.flatten(transpose_9, -2);  transpose_9 = None
    encoder_layers_1_self_attn_o_proj = getattr(self.encoder.layers, "1").self_attn.o_proj(flatten_1);  flatten_1 = None
    add_3 = torch.add(encoder_layers_0_ffn_norm, encoder_layers_1_self_attn_o_proj);  encoder_layers_0_ffn_norm = encoder_layers_1_self_attn_o_proj = None
    encoder_layers_1_self_attn_norm = getattr(self.encoder.layers, "1").self_attn_norm(add_3);  add_3 = None
    encoder_layers_1_ffn_fc1 = getattr(self.encoder.layers, "1").ffn.fc1(encoder_layers_1_self_attn_norm)
    relu_1 = torch.relu(encoder_layers_1_ffn_fc1);  encoder_layers_1_ffn_fc1 = None
    encoder_layers_1_ffn_fc2 = getattr(self.encoder.layers, "1").ffn.fc2(relu_1);  relu_1 = None
    add_4 = torch.add(encoder_layers_1_self_attn_norm, encoder_layers_1_ffn_fc2);  encoder_layers_1_self_attn_norm = encoder_layers_1_ffn_fc2 = None
    encoder_layers_1_ffn_norm = getattr(self.encoder.layers, "1").ffn_norm(add_4);  add_4 = None
    embed_1 = self.embed(tgt_in)
    mul_3 = torch.mul(embed_1, 8.0);  embed_1 = None
    size_1 = tgt_in.size(1);  tgt_in = None
    getattr_3 = mul_3.device
    arange_1 = torch.arange(0, size_1, device = getattr_3);  size_1 = getattr_3 = None
    getattr_4 = mul_3.dtype
    sinusoidal_1 = attncomp_lower_ops_sinusoidal(arange_1, 64, getattr_4);  arange_1 = getattr_4 = None
    add_5 = torch.add(mul_3, sinusoidal_1);  mul_3 = sinusoidal_1 = None
    decoder_layers_0_self_attn_q_proj_weight = getattr(self.decoder.layers, "0").self_attn.q_proj.weight
    decoder_layers_0_self_attn_k_proj_weight = getattr(self.decoder.layers, "0").self_attn.k_proj.weight
    decoder_layers_0_self_attn_v_proj_weight = getattr(self.decoder.layers, "0").self_attn.v_proj.weight
    cat_2 = torch.cat((decoder_layers_0_self_attn_q_proj_weight, decoder_layers_0_self_attn_k_proj_weight, decoder_layers_0_self_attn_v_proj_weight));  decoder_layers_0_self_attn_q_proj_weight = decoder_layers_0_self_attn_k_proj_weight = decoder_layers_0_self_attn_v_proj_weight = None
    linear_2 = torch._C._nn.linear(add_5, cat_2, None);  cat_2 = None
    split_2 = torch.functional.split(linear_2, (64, 64, 64), -1);  linear_2 = None
    getitem_6 = split_2[0]
    getitem_7 = split_2[1]
    getitem_8 = split_2[2];  split_2 = None
    unflatten_6 = torch.unflatten(getitem_7, -1, (4, 16));  getitem_7 = None
    transpose_10 = torch.transpose(unflatten_6, 1, 2);  unflatten_6 = None
    unflatten_7 = torch.unflatten(getitem_8, -1, (4, 16));  getitem_8 = None
    transpose_11 = torch.transpose(unflatten_7, 1, 2);  unflatten_7 = None
    unflatten_8 = torch.unflatten(getitem_6, -1, (4, 16));  getitem_6 = None
    transpose_12 = torch.transpose(unflatten_8, 1, 2);  unflatten_8 = None
    scaled_dot_product_attention_2 = torch._C._nn.scaled_dot_product_attention(transpose_12, transpose_10, transpose_11, scale = 0.25, is_causal = True);  transpose_12 = transpose_10 = transpose_11 = None
    transpose_14 = torch.transpose(scaled_dot_product_attention_2, 1, 2);  scaled_dot_product_attention_2 = None
    flatten_2 = torch.flatten(transpose_14, -2);  transpose_14 = None
    decoder_layers_0_self_attn_o_proj = getattr(self.decoder.layers, "0").self_attn.o_proj(flatten_2);  flatten_2 = None
    add_6 = torch.add(add_5, decoder_layers_0_self_attn_o_proj);  add_5 = decoder_layers_0_self_attn_o_proj = None
    decoder_layers_0_self_attn_norm = getattr(self.decoder.layers, "0").self_attn_norm(add_6);  add_6 = None
    decoder_layers_0_cross_attn_k_proj_weight = getattr(self.decoder.layers, "0").cross_attn.k_proj.weight
    decoder_layers_0_cross_attn_v_proj_weight = getattr(self.decoder.layers, "0").cross_attn.v_proj.weight
    cat_3 = torch.cat((decoder_layers_0_cross_attn_k_proj_weight, decoder_layers_0_cross_attn_v_proj_weight));  decoder_layers_0_cross_attn_k_proj_weight = decoder_layers_0_cross_attn_v_proj_weight = None
    linear_3 = torch._C._nn.linear(encoder_layers_1_ffn_norm, cat_3, None);  cat_3 = None
    split_3 = torch.functional.split(linear_3, (64, 64), -1);  linear_3 = None
    getitem_9 = split_3[0]
    getitem_10 = split_3[1];  split_3 = None
    unflatten_9 = torch.unflatten(getitem_9, -1, (4, 16));  getitem_9 = None
    transpose_15 = torch.transpose(unflatten_9, 1, 2);  unflatten_9 = None
    unflatten_10 = torch.unflatten(getitem_10, -1, (4, 16));  getitem_10 = None
    transpose_16 = torch.transpose(unflatten_10, 1, 2);  unflatten_10 = None
    decoder_layers_0_cross_attn_q_proj = getattr(self.decoder.layers, "0").cross_attn.q_proj(decoder_layers_0_self_attn_norm)
    unflatten_11 = torch.unflatten(decoder_layers_0_cross_attn_q_proj, -1, (4, 16));  decoder_layers_0_cross_attn_q_proj = None
    transpose_17 = torch.transpose(unflatten_11, 1, 2);  unflatten_11 = None
    scaled_dot_product_attention_3 = torch._C._nn.scaled_dot_product_attention(transpose_17, transpose_15, transpose_16, scale = 0.25);  transpose_17 = transpose_15 = transpose_16 = None
    transpose_19 = torch.transpose(scaled_dot_product_attention_3, 1, 2);  scaled_dot_product_attention_3 = None
    flatten_3 = torch.flatten(transpose_19, -2);  transpose_19 = None
    decoder_layers_0_cross_attn_o_proj = getattr(self.decoder.layers, "0").cross_attn.o_proj(flatten_3);  flatten_3 = None
    add_7 = torch.add(decoder_layers_0_self_attn_norm, decoder_layers_0_cross_attn_o_proj);  decoder_layers_0_self_attn_norm = decoder_layers_0_cross_attn_o_proj = None
    decoder_layers_0_cross_attn_norm = getattr(self.decoder.layers, "0").cross_attn_norm(add_7);  add_7 = None
    decoder_layers_0_ffn_fc1 = getattr(self.decoder.layers, "0").ffn.fc1(decoder_layers_0_cross_attn_norm)
    relu_2 = torch.relu(decoder_layers_0_ffn_fc1);  decoder_layers_0_ffn_fc1 = None
    decoder_layers_0_ffn_fc2 = getattr(self.decoder.layers, "0").ffn.fc2(relu_2);  relu_2 = None
    add_8 = torch.add(decoder_layers_0_cross_attn_norm, decoder_layers_0_ffn_fc2);  decoder_layers_0_cross_attn_norm = decoder_layers_0_ffn_fc2 = None
    decoder_layers_0_ffn_norm = getattr(self.decoder.layers, "0").ffn_norm(add_8);  add_8 = None
    decoder_layers_1_self_attn_q_proj_weight = getattr(self.decoder.layers, "1").self_attn.q_proj.weight
    decoder_layers_1_self_attn_k_proj_weight = getattr(self.decoder.layers, "1").self_attn.k_proj.weight
    decoder_layers_1_self_attn_v_proj_weight = getattr(self.decoder.layers, "1").self_attn.v_proj.weight
    cat_4 = torch.cat((decoder_layers_1_self_attn_q_proj_weight, decoder_layers_1_self_attn_k_proj_weight, decoder_layers_1_self_attn_v_proj_weight));  decoder_layers_1_self_attn_q_proj_weight = decoder_layers_1_self_attn_k_proj_weight = decoder_layers_1_self_attn_v_proj_weight = None
    linear_4 = torch._C._nn.linear(decoder_layers_0_ffn_norm, cat_4, None);  cat_4 = None
    split_4 = torch.functional.split(linear_4, (64, 64, 64), -1);  linear_4 = None
    getitem_11 = split_4[0]
    getitem_12 = split_4[1]
    getitem_13 = split_4[2];  split_4 = None
    unflatten_12 = torch.unflatten(getitem_12, -1, (4, 16));  getitem_12 = None
    transpose_20 = torch.transpose(unflatten_12, 1, 2);  unflatten_12 = None
    unflatten_13 = torch.unflatten(getitem_13, -1, (4, 16));  getitem_13 = None
    transpose_21 = torch.transpose(unflatten_13, 1, 2);  unflatten_13 = None
    unflatten_14 = torch.unflatten(getitem_11, -1, (4, 16));  getitem_11 = None
    transpose_22 = torch.transpose(unflatten_14, 1, 2);  unflatten_14 = None
    scaled_dot_product_attention_4 = torch._C._nn.scaled_dot_product_attention(transpose_22, transpose_20, transpose_21, scale = 0.25, is_causal = True);  transpose_22 = transpose_20 = transpose_21 = None
    transpose_24 = torch.transpose(scaled_dot_product_attention_4, 1, 2);  scaled_dot_product_attention_4 = None
    flatten_4 = torch.flatten(transpose_24, -2);  transpose_24 = None
    decoder_layers_1_self_attn_o_proj = getattr(self.decoder.layers, "1").self_attn.o_proj(flatten_4);  flatten_4 = None
    add_9 = torch.add(decoder_layers_0_ffn_norm, decoder_layers_1_self_attn_o_proj);  decoder_layers_0_ffn_norm = decoder_layers_1_self_attn_o_proj = None
    decoder_layers_1_self_attn_norm = getattr(self.decoder.layers, "1").self_attn_norm(add_9);  add_9 = None
    decoder_layers_1_cross_attn_k_proj_weight = getattr(self.decoder.layers, "1").cross_attn.k_proj.weight
    decoder_layers_1_cross_attn_v_proj_weight = getattr(self.decoder.layers, "1").cross_attn.v_proj.weight
    cat_5 = torch.cat((decoder_layers_1_cross_attn_k_proj_weight, decoder_layers_1_cross_attn_v_proj_weight));  decoder_layers_1_cross_attn_k_proj_weight = decoder_layers_1_cross_attn_v_proj_weight = None
    linear_5 = torch._C._nn.linear(encoder_layers_1_ffn_norm, cat_5, None);  encoder_layers_1_ffn_norm = cat_5 = None
    split_5 = torch.functional.split(linear_5, (64, 64), -1);  linear_5 = None
    getitem_14 = split_5[0]
    getitem_15 = split_5[1];  split_5 = None
    unflatten_15 = torch.unflatten(getitem_14, -1, (4, 16));  getitem_14 = None
    transpose_25 = torch.transpose(unflatten_15, 1, 2);  unflatten_15 = None
    unflatten_16 = torch.unflatten(getitem_15, -1, (4, 16));  getitem_15 = None
    transpose_26 = torch.transpose(unflatten_16, 1, 2);  unflatten_16 = None
    decoder_layers_1_cross_attn_q_proj = getattr(self.decoder.layers, "1").cross_attn.q_proj(decoder_layers_1_self_attn_norm)
    unflatten_17 = torch.unflatten(decoder_layers_1_cross_attn_q_proj, -1, (4, 16));  decoder_layers_1_cross_attn_q_proj = None
    transpose_27 = torch.transpose(unflatten_17, 1, 2);  unflatten_17 = None
    scaled_dot_product_attention_5 = torch._C._nn.scaled_dot_product_attention(transpose_27, transpose_25, transpose_26, scale = 0.25);  transpose_27 = transpose_25 = transpose_26 = None
    transpose_29 = torch.transpose(scaled_dot_product_attention_5, 1, 2);  scaled_dot_product_attention_5 = None
    flatten_5 = torch.flatten(transpose_29, -2);  transpose_29 = None
    decoder_layers_1_cross_attn_o_proj = getattr(self.decoder.layers, "1").cross_attn.o_proj(flatten_5);  flatten_5 = None
    add_10 = torch.add(decoder_layers_1_self_attn_norm, decoder_layers_1_cross_attn_o_proj);  decoder_layers_1_self_attn_norm = decoder_layers_1_cross_attn_o_proj = None
    decoder_layers_1_cross_attn_norm = getattr(self.decoder.layers, "1").cross_attn_norm(add_10);  add_10 = None
    decoder_layers_1_ffn_fc1 = getattr(self.decoder.layers, "1").ffn.fc1(decoder_layers_1_cross_attn_norm)
    relu_3 = torch.relu(decoder_layers_1_ffn_fc1);  decoder_layers_1_ffn_fc1 = None
    decoder_layers_1_ffn_fc2 = getattr(self.decoder.layers, "1").ffn.fc2(relu_3);  relu_3 = None
    add_11 = torch.add(decoder_layers_1_cross_attn_norm, decoder_layers_1_ffn_fc2);  decoder_layers_1_cross_attn_norm = decoder_layers_1_ffn_fc2 = None
    decoder_layers_1_ffn_norm = getattr(self.decoder.layers, "1").ffn_norm(add_11);  add_11 = None
    return decoder_layers_1_ffn_norm
    