"""Functions that share a bare name, for the summary's Python table: a
module-level main() and Worker.main(), this file's decode() and json's
JSONDecoder.decode(), and a recursive fact(). Usage: py_samename.py ROUNDS
main() runs once; Worker.main() ROUNDS times; decode() (and through
json.loads, JSONDecoder.decode) 3 times a round; fact(30) twice a round."""
import json
import sys


def fact(n):
    return 1 if n <= 1 else n * fact(n - 1)


def decode(text):
    return json.loads(text)["v"]


class Worker:
    def main(self, i):
        s = 0
        for k in range(3):
            s += decode('{"v": %d}' % (i + k))
        return s + fact(30) % 7 + fact(30) % 5


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    w = Worker()
    print(sum(w.main(i) for i in range(rounds)))


if __name__ == "__main__":
    main()
