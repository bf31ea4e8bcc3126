# gpuenv BallChase for Godot 3.2, speaking the godot-rl wire protocol (godot-rl 0.8.x, protocol 0.7).
#
# Python listens on 127.0.0.1:PORT; this process connects (retrying while Python starts). Each message
# is a 4-byte little-endian length then JSON text (StreamPeer.put_string/get_string frame exactly so).
# Messages from Python: handshake (no reply), env_info, reset, action, call, close.
#
# BallChase: N agents, each alone in its own square arena (agents never touch each other), a
# KinematicBody2D moved by Godot's physics (move_and_slide against four static walls) chasing a
# target point. Action "move": continuous, 2 values in [-1, 1] (velocity as a fraction of SPEED).
# Observation "obs" (6): target minus position / ARENA, position / ARENA * 2 - 1, velocity / SPEED.
# Reward per agent step: 10 x (distance closed) / ARENA, plus 1 when the target is caught (then it
# moves). An episode is EPISODE_STEPS agent steps (a time limit: no terminal state); the agent resets
# itself when it ends: the obs sent with done=true is the first of the next episode, and the one the
# episode ended on comes in info.terminal_obs (godot-rl's own plugin sends none).
# One agent step = ACTION_REPEAT physics ticks of 1/60 s of game time, whatever the speedup.
extends Node

const MAJOR_VERSION = "0"
const MINOR_VERSION = "7"
const ARENA = 200.0
const SPEED = 100.0
const CATCH_RADIUS = 12.0
const AGENT_RADIUS = 6.0
const EPISODE_STEPS = 200

var port = 11008
var env_seed = 0
var action_repeat = 8
var speedup = 1
var n_agents = 16
var stream = null
var ticks = 0
var waiting_reply = false
var agents = []
var t_start_usec = 0

class Agent:
	var body
	var origin = Vector2()
	var target = Vector2()
	var velocity = Vector2()
	var steps = 0
	var reward = 0.0
	var done = false
	var terminal = []
	var last_dist = 0.0
	var rng = RandomNumberGenerator.new()

	func random_point():
		return origin + Vector2(rng.randf_range(AGENT_RADIUS, ARENA - AGENT_RADIUS), rng.randf_range(AGENT_RADIUS, ARENA - AGENT_RADIUS))

	func reset():
		body.position = random_point()
		target = random_point()
		velocity = Vector2()
		steps = 0
		last_dist = body.position.distance_to(target)

	func obs():
		var rel = (target - body.position) / ARENA
		var p = (body.position - origin) / ARENA * 2.0 - Vector2(1, 1)
		var v = velocity / SPEED
		return [clamp(rel.x, -1, 1), clamp(rel.y, -1, 1), clamp(p.x, -1, 1), clamp(p.y, -1, 1), clamp(v.x, -1, 1), clamp(v.y, -1, 1)]

	func tick():
		velocity = body.move_and_slide(velocity)

	func end_step():
		# called after ACTION_REPEAT ticks: reward for the step, and its end
		var d = body.position.distance_to(target)
		reward = 10.0 * (last_dist - d) / ARENA
		if d < CATCH_RADIUS:
			reward += 1.0
			target = random_point()
			d = body.position.distance_to(target)
		last_dist = d
		steps += 1
		done = steps >= EPISODE_STEPS
		terminal = []
		if done:
			terminal = obs()  # sent in info: the observation the episode ended on
			reset()


func _args():
	var out = {}
	for a in OS.get_cmdline_args():
		if a.begins_with("--") and "=" in a:
			var kv = a.substr(2, a.length()).split("=", true, 1)
			out[kv[0]] = kv[1]
	return out


func _ready():
	var args = _args()
	port = int(args.get("port", "11008"))
	env_seed = int(args.get("env_seed", "0"))
	action_repeat = max(1, int(args.get("action_repeat", "8")))
	speedup = max(1, int(args.get("speedup", "1")))
	n_agents = max(1, int(args.get("n_agents", "16")))
	Engine.iterations_per_second = 60 * speedup
	Engine.time_scale = speedup
	for i in range(n_agents):
		agents.append(_make_agent(i))
	if not _connect():
		printerr("gpuenv ballchase: no connection to 127.0.0.1:%d" % port)
		get_tree().quit(1)
		return
	t_start_usec = OS.get_ticks_usec()


func _make_agent(i):
	var a = Agent.new()
	a.rng.seed = env_seed * 1000003 + i
	a.origin = Vector2((i % 64) * (ARENA + 50.0), (i / 64) * (ARENA + 50.0))
	var walls = StaticBody2D.new()
	walls.collision_layer = 2
	walls.collision_mask = 0
	for w in [[Vector2(0, -5), Vector2(ARENA, 10)], [Vector2(0, ARENA + 5), Vector2(ARENA, 10)], [Vector2(-5, 0), Vector2(10, ARENA)], [Vector2(ARENA + 5, 0), Vector2(10, ARENA)]]:
		var shape = CollisionShape2D.new()
		var rect = RectangleShape2D.new()
		rect.extents = w[1] / 2.0
		shape.shape = rect
		shape.position = a.origin + w[0] + (Vector2(ARENA / 2.0, 0) if w[1].x > w[1].y else Vector2(0, ARENA / 2.0))
		walls.add_child(shape)
	add_child(walls)
	var body = KinematicBody2D.new()
	body.collision_layer = 1
	body.collision_mask = 2
	var cs = CollisionShape2D.new()
	var circle = CircleShape2D.new()
	circle.radius = AGENT_RADIUS
	cs.shape = circle
	body.add_child(cs)
	add_child(body)
	a.body = body
	a.reset()
	return a


func _connect():
	var deadline = OS.get_ticks_msec() + 60000
	while OS.get_ticks_msec() < deadline:
		stream = StreamPeerTCP.new()
		if stream.connect_to_host("127.0.0.1", port) == OK:
			var wait_until = OS.get_ticks_msec() + 1000
			while stream.get_status() == StreamPeerTCP.STATUS_CONNECTING and OS.get_ticks_msec() < wait_until:
				OS.delay_msec(1)
			if stream.get_status() == StreamPeerTCP.STATUS_CONNECTED:
				stream.set_no_delay(true)
				return true
		OS.delay_msec(20)
	return false


func _send(d):
	stream.put_string(to_json(d))


func _receive():
	var text = stream.get_string(-1)
	if stream.get_status() != StreamPeerTCP.STATUS_CONNECTED:
		return null
	var parsed = parse_json(text)
	return parsed


func _physics_process(_delta):
	if stream == null:
		return
	for a in agents:
		a.tick()
	ticks += 1
	if waiting_reply and ticks % action_repeat != 0:
		return
	if waiting_reply:
		var obs = []
		var rewards = []
		var dones = []
		var infos = []
		for a in agents:
			a.end_step()
			obs.append({"obs": a.obs()})
			rewards.append(a.reward)
			dones.append(a.done)
			infos.append({"terminal_obs": a.terminal} if a.done else {})
		_send({"type": "step", "obs": obs, "reward": rewards, "done": dones, "info": infos})
		waiting_reply = false
	_handle_messages()


func _handle_messages():
	while true:
		var msg = _receive()
		if msg == null or typeof(msg) != TYPE_DICTIONARY:
			get_tree().quit(0)  # Python went away: nothing to run for
			set_physics_process(false)
			return
		var kind = msg.get("type", "")
		if kind == "handshake":
			continue
		elif kind == "env_info":
			var obs_space = []
			var act_space = []
			var names = []
			for _a in agents:
				obs_space.append({"obs": {"size": [6], "space": "box"}})
				act_space.append({"move": {"size": 2, "action_type": "continuous"}})
				names.append("shared_policy")
			_send({"type": "env_info", "n_agents": n_agents, "observation_space": obs_space, "action_space": act_space, "agent_policy_names": names})
		elif kind == "reset":
			var obs = []
			for a in agents:
				a.reset()
				obs.append({"obs": a.obs()})
			_send({"type": "reset", "obs": obs})
		elif kind == "call":
			# gpuenv's own: the engine's accounting (physics ticks, microseconds since connecting)
			_send({"type": "call", "returns": [Engine.get_physics_frames(), OS.get_ticks_usec() - t_start_usec, Engine.get_version_info()["string"]]})
		elif kind == "action":
			var actions = msg["action"]
			for i in range(agents.size()):
				var m = actions[i]["move"]
				agents[i].velocity = Vector2(clamp(float(m[0]), -1, 1), clamp(float(m[1]), -1, 1)) * SPEED
			waiting_reply = true
			ticks = 0
			return
		elif kind == "close":
			get_tree().quit(0)
			set_physics_process(false)
			return
